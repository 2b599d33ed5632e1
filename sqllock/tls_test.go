package sqllock_test

import (
	"context"
	"database/sql"
	"errors"
	"net"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/distlock/distlock"
	"github.com/distlock/distlock/sandbox"
)

// tlsPassword is the TLS test user's password, looked for in every error.
const tlsPassword = "Pw-s3cret-tls-7fd2"

// TestTLS starts a MariaDB that refuses clients without TLS, with a
// certificate from a CA made here, and connects through the URL's TLS
// parameters: verified against the right CA it works; against another CA,
// or without TLS, Open fails with an error that says why and never shows
// the password.
func TestTLS(t *testing.T) {
	certs, err := sandbox.WriteCerts(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	other, err := sandbox.WriteCerts(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), sandbox.DefaultStartTimeout+time.Minute)
	defer cancel()
	g, err := sandbox.Start(ctx, sandbox.Spec{Kind: sandbox.MariaDB, Logf: func(string, ...any) {},
		MariaDBTLS: &sandbox.ServerTLS{CA: certs.CA, Cert: certs.ServerCert, Key: certs.ServerKey, Require: true}})
	if err != nil {
		setting, serr := sandbox.ProviderSetting(sandbox.Spec{Kind: sandbox.MariaDB})
		if serr == nil && setting == sandbox.ProviderAuto && errors.Is(err, sandbox.ErrUnavailable) {
			t.Skipf("no MariaDB here: %v", err)
		}
		t.Fatalf("starting MariaDB with TLS: %v", err)
	}
	t.Cleanup(func() { _ = g.Close() })
	addr := g.Addrs()[0]
	_, port, _ := net.SplitHostPort(addr)

	admin, err := sql.Open("mysql", sandbox.MySQLDSN(addr)+"&tls=skip-verify")
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close()
	var require string
	if err := admin.QueryRowContext(ctx, "SELECT @@require_secure_transport").Scan(&require); err != nil || require != "1" && require != "ON" {
		t.Fatalf("require_secure_transport = %q, %v: the server accepts clients without TLS", require, err)
	}
	for _, q := range []string{
		"CREATE USER 'tlsuser'@'%' IDENTIFIED BY '" + tlsPassword + "' REQUIRE SSL",
		"GRANT ALL ON `" + sandbox.Database + "`.* TO 'tlsuser'@'%'",
	} {
		if _, err := admin.ExecContext(ctx, q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}

	// The certificate names 127.0.0.1 and localhost.
	mkURL := func(host, query string) string {
		u := url.URL{Scheme: "mysql", User: url.UserPassword("tlsuser", tlsPassword),
			Host: net.JoinHostPort(host, port), Path: "/" + sandbox.Database, RawQuery: query}
		return u.String()
	}
	rootURL := func(u string) string {
		return strings.Replace(u, "tlsuser:"+tlsPassword, "root:"+sandbox.RootPassword, 1)
	}
	caParam := "tls=true&tls_ca=" + url.QueryEscape(certs.CA)
	for _, tc := range []struct{ name, url string }{
		{"verified by IP", mkURL("127.0.0.1", caParam)},
		{"verified by name", mkURL("localhost", caParam)},
		{"skip-verify", mkURL("127.0.0.1", "tls=skip-verify")},
		{"skip-verify, a user that does not require TLS", rootURL(mkURL("127.0.0.1", "tls=skip-verify"))},
	} {
		l, err := distlock.Open(ctxFor(t, 30*time.Second), tc.url+"&ttl=5s")
		if err != nil {
			t.Errorf("%s: Open: %v", tc.name, err)
			continue
		}
		key := uniqueKey("tls")
		le, err := l.Acquire(ctxFor(t, 10*time.Second), key)
		if err != nil {
			t.Errorf("%s: Acquire: %v", tc.name, err)
		} else {
			release(t, le)
		}
		if err := l.Close(); err != nil {
			t.Errorf("%s: Close: %v", tc.name, err)
		}
	}

	for _, tc := range []struct {
		name, url   string
		unavailable bool     // a TLS failure (else the server's refusal)
		want        []string // the error names one of these
	}{
		{"another CA", mkURL("127.0.0.1", "tls=true&tls_ca="+url.QueryEscape(other.CA)), true,
			[]string{"certificate signed by unknown authority"}},
		{"the system's CAs", mkURL("127.0.0.1", "tls=true"), true, []string{"certificate signed by unknown authority"}},
		{"no TLS, a user that requires it", mkURL("127.0.0.1", "tls=false"), false, []string{"Access denied"}},
		// The same user and password work with TLS (above): MariaDB
		// refuses the transport with "access denied".
		{"no TLS, a user that does not", rootURL(mkURL("127.0.0.1", "tls=false")), false, []string{"Access denied", "insecure transport"}},
	} {
		l, err := distlock.Open(ctxFor(t, 30*time.Second), tc.url)
		if err == nil {
			_ = l.Close()
			t.Errorf("%s: Open succeeded", tc.name)
			continue
		}
		t.Logf("%s: %v", tc.name, err)
		if tc.unavailable && !errors.Is(err, distlock.ErrUnavailable) {
			t.Errorf("%s: %v, want ErrUnavailable", tc.name, err)
		}
		if tc.unavailable && !strings.Contains(err.Error(), "check tls_ca") {
			t.Errorf("%s: the error does not say which parameter to check: %v", tc.name, err)
		}
		found := false
		for _, w := range tc.want {
			found = found || strings.Contains(err.Error(), w)
		}
		if !found {
			t.Errorf("%s: error %q names none of %q", tc.name, err, tc.want)
		}
		if strings.Contains(err.Error(), tlsPassword) || strings.Contains(err.Error(), ":"+sandbox.RootPassword+"@") {
			t.Errorf("%s: the error shows the password: %v", tc.name, err)
		}
	}
}
