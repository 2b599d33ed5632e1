package zklock

import (
	"errors"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/distlock/distlock"
	"github.com/distlock/distlock/sandbox"
)

func TestParseURLTLS(t *testing.T) {
	certs, err := sandbox.WriteCerts(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	q := url.QueryEscape
	c, err := parse(t, "zks://h1:2281,h2:2281/locks?tls_ca="+q(certs.CA)+"&tls_cert="+q(certs.ClientCert)+"&tls_key="+q(certs.ClientKey)+"&tls_server_name=zk.internal")
	if err != nil {
		t.Fatal(err)
	}
	if c.dial.tls == nil || c.dial.tls.RootCAs == nil || len(c.dial.tls.Certificates) != 1 || c.dial.tls.ServerName != "zk.internal" {
		t.Errorf("zks:// TLS config = %+v", c.dial.tls)
	}
	if c, err := parse(t, "zks://h1:2281"); err != nil || c.dial.tls == nil {
		t.Errorf("zks:// without parameters: tls %v, %v; want TLS with the system's roots", c.dial.tls, err)
	}
	if c, err := parse(t, "zk://h1"); err != nil || c.dial.tls != nil {
		t.Errorf("zk:// = tls %v, %v; want no TLS", c.dial.tls, err)
	}
	for _, raw := range []string{"zk://h1?tls_ca=" + q(certs.CA), "zk://h1?tls_insecure_skip_verify=true", "zks://h1?tls_cert=" + q(certs.ClientCert)} {
		if _, err := parse(t, raw); err == nil {
			t.Errorf("%s: no error", raw)
		}
	}
}

// TestTLS: a zks:// client works against a ZooKeeper serving TLS only
// (with and without a client certificate, and over a connection made with
// TLSDialer and passed to New); a plain zk:// client cannot talk to the
// secure port, and a client that trusts another CA fails at once with an
// error that names the certificate.
func TestTLS(t *testing.T) {
	if testing.Short() {
		t.Skip("needs a ZooKeeper server (sandbox); skipped with -short")
	}
	g := sandbox.StartT(t, sandbox.Spec{Kind: sandbox.ZooKeeper, TLS: true})
	files, _ := g.TLSFiles()
	addr := g.Node(0).Addr()
	if !strings.HasPrefix(g.URL(), "zks://") {
		t.Fatalf("URL of a TLS group = %q, want zks://", g.URL())
	}
	use := func(raw string) {
		t.Helper()
		l, err := distlock.Open(ctxFor(t, 30*time.Second), raw)
		if err != nil {
			t.Fatalf("Open(%s): %v", raw, err)
		}
		defer l.Close()
		le, err := l.TryAcquire(ctxFor(t, 10*time.Second), uniqueKey(t))
		if err != nil {
			t.Fatalf("TryAcquire over TLS: %v", err)
		}
		if err := le.Refresh(ctxFor(t, 10*time.Second), 0); err != nil {
			t.Errorf("Refresh over TLS: %v", err)
		}
		if err := le.Release(ctxFor(t, 10*time.Second)); err != nil {
			t.Errorf("Release over TLS: %v", err)
		}
	}
	use(g.URL() + "&session_timeout=2s")
	use(g.URL() + "&session_timeout=2s&tls_cert=" + url.QueryEscape(files.ClientCert) + "&tls_key=" + url.QueryEscape(files.ClientKey))

	// New over a connection the caller made with TLSDialer.
	conn, events, err := zk.Connect([]string{addr}, 2*time.Second, zk.WithDialer(TLSDialer(g.ClientTLS())), zk.WithLogger(quietLogger{}))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(conn.Close)
	if err := awaitSession(ctxFor(t, 30*time.Second), events, nil); err != nil {
		t.Fatalf("session over TLSDialer: %v", err)
	}
	d, err := New(conn, &Options{SessionTimeout: 2 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	l := distlock.New(d)
	le, err := l.TryAcquire(ctxFor(t, 10*time.Second), uniqueKey(t))
	if err != nil {
		t.Fatalf("TryAcquire through New over TLSDialer: %v", err)
	}
	_ = le.Release(ctxFor(t, 10*time.Second))
	_ = l.Close()

	// A plain client on the secure port: no session.
	_, err = distlock.Open(ctxFor(t, 30*time.Second), "zk://"+addr+"?connect_timeout=3s")
	if !errors.Is(err, distlock.ErrUnavailable) || !strings.Contains(err.Error(), "zks://") {
		t.Errorf("plain zk:// to the TLS port = %v; want ErrUnavailable naming zks://", err)
	}

	// A client that trusts another CA: refused at once, saying why.
	other, err := sandbox.WriteCerts(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	_, err = distlock.Open(ctxFor(t, 30*time.Second), "zks://"+addr+"?connect_timeout=20s&tls_ca="+url.QueryEscape(other.CA))
	if !errors.Is(err, distlock.ErrInvalidConfig) || !strings.Contains(err.Error(), "certificate") {
		t.Errorf("zks:// with the wrong CA = %v; want ErrInvalidConfig naming the certificate", err)
	}
	if took := time.Since(start); took > 10*time.Second {
		t.Errorf("zks:// with the wrong CA took %v to fail, want well within connect_timeout", took)
	}
	t.Logf("plain client: %v", errOr(distlock.Open(ctxFor(t, 10*time.Second), "zk://"+addr+"?connect_timeout=1s")))
	t.Logf("wrong CA: %v", err)
}

func errOr(l *distlock.Locker, err error) error {
	if l != nil {
		_ = l.Close()
	}
	return err
}
