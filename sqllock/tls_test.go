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
	"github.com/distlock/distlock/sqllock"
	"github.com/jackc/pgx/v5"
)

// tlsPassword is the TLS test user's password, looked for in every error.
const tlsPassword = "Pw-s3cret-tls-7fd2"

// TestTLS starts a MariaDB that refuses clients without TLS, with a
// certificate from a CA made here, and connects through the URL's TLS
// parameters: verified against the right CA it works; against another CA,
// or without TLS, Open fails with an error that says why and never shows
// the password.
func TestTLS(t *testing.T) {
	certs, err := writeCerts(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	other, err := writeCerts(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	addr, _, _ := startTLSServer(t, false, certs)
	ctx := ctxFor(t, time.Minute)
	_, port, _ := net.SplitHostPort(addr)

	admin, err := sql.Open("mysql", mysqlDSN(addr)+"&tls=skip-verify")
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
		"GRANT ALL ON `" + dbName + "`.* TO 'tlsuser'@'%'",
	} {
		if _, err := admin.ExecContext(ctx, q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}

	// The certificate names 127.0.0.1 and localhost.
	mkURL := func(host, query string) string {
		u := url.URL{Scheme: "mysql", User: url.UserPassword("tlsuser", tlsPassword),
			Host: net.JoinHostPort(host, port), Path: "/" + dbName, RawQuery: query}
		return u.String()
	}
	rootURL := func(u string) string {
		return strings.Replace(u, "tlsuser:"+tlsPassword, "root:"+rootPassword, 1)
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
		if strings.Contains(err.Error(), tlsPassword) || strings.Contains(err.Error(), ":"+rootPassword+"@") {
			t.Errorf("%s: the error shows the password: %v", tc.name, err)
		}
	}
}

// TestPostgresTLS: against a PostgreSQL that accepts only TLS and a
// password, the URL's sslmode=verify-full and sslrootcert verify the
// server, sslcert and sslkey present a client certificate (the lock's
// session shows it in pg_stat_ssl); another CA, or no TLS, is refused.
func TestPostgresTLS(t *testing.T) {
	addr, serverURL, files := startTLSServer(t, true, certFiles{})
	ctx := ctxFor(t, time.Minute)
	withCert := serverURL + "&" + url.Values{"sslcert": {files.ClientCert}, "sslkey": {files.ClientKey}, "table": {testTable}}.Encode()
	l, err := distlock.Open(ctx, withCert, distlock.WithDefaultTTL(5*time.Second))
	if err != nil {
		t.Fatalf("Open with TLS and a client certificate: %v", err)
	}
	defer l.Close()
	key := uniqueKey("pg-tls")
	le, err := l.Acquire(ctx, key)
	if err != nil {
		t.Fatalf("Acquire over TLS: %v", err)
	}
	admin, err := pgx.Connect(ctx, serverURL)
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close(context.Background())
	var ssl bool
	var dn *string
	err = admin.QueryRow(ctx, `SELECT s.ssl, s.client_dn FROM pg_stat_ssl s JOIN "`+testTable+sqllock.FenceSuffix+`" f ON s.pid = f.holder_id WHERE f.name = $1`, []byte(key)).Scan(&ssl, &dn)
	if err != nil {
		t.Fatalf("the holder's session in pg_stat_ssl: %v", err)
	}
	if !ssl || dn == nil || !strings.Contains(*dn, "distlock sandbox client") {
		t.Errorf("the lock's session: ssl=%v client_dn=%v, want TLS with the sandbox's client certificate", ssl, dn)
	}
	release(t, le)

	other, err := writeCerts(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct{ what, url, want string }{
		{"plaintext", pgURL(addr), "no encryption"},
		{"the server checked against another CA", pgTLSURL(addr, other.CA), "certificate"},
	} {
		_, err := distlock.Open(ctx, tc.url)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want an error containing %q", tc.what, err, tc.want)
		}
		if err != nil && strings.Contains(err.Error(), pgPassword+"@") {
			t.Errorf("%s: the error shows the password: %v", tc.what, err)
		}
	}
}
