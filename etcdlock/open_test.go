package etcdlock_test

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/distlock/distlock"
	"github.com/distlock/distlock/backend"
	"github.com/distlock/distlock/etcdlock"
	"github.com/distlock/distlock/sandbox"
)

func TestParseURL(t *testing.T) {
	p, err := etcdlock.ParseForTest("etcd://u:secret@h1,h2:2380/app/locks?ttl=10s&dial_timeout=2s")
	if err != nil {
		t.Fatal(err)
	}
	want := etcdlock.Parsed{
		Endpoints: []string{"http://h1:2379", "http://h2:2380"}, Prefix: "/app/locks",
		TTL: 10 * time.Second, User: "u", Dial: 2 * time.Second,
	}
	if !slices.Equal(p.Endpoints, want.Endpoints) || p.Prefix != want.Prefix || p.TTL != want.TTL || p.User != want.User || p.TLS || p.Dial != want.Dial {
		t.Errorf("parsed %+v, want %+v", p, want)
	}
	p, err = etcdlock.ParseForTest("etcds://h1/?tls_server_name=etcd.local")
	if err != nil {
		t.Fatal(err)
	}
	if !p.TLS || p.Endpoints[0] != "https://h1:2379" || p.TTL != etcdlock.DefaultTTL {
		t.Errorf("etcds URL parsed as %+v", p)
	}
}

func TestParseURLErrors(t *testing.T) {
	for raw, part := range map[string]string{
		"etcd:///locks":                           "no host",
		"etcd://h1/locks?ttl=1s":                  "ttl",
		"etcd://h1/locks?ttl=abc":                 "ttl",
		"etcd://h1/locks?bogus=1":                 "bogus",
		"etcd://h1/locks?tls_ca=/x":               "etcds://",
		"etcds://h1/locks?tls_cert=c.pem":         "tls_cert and tls_key",
		"etcds://h1/locks?tls_ca=/does/not/exist": "tls_ca",
		"etcd://h1/a//b":                          "empty segment",
		"etcd://h1/%25x":                          "'%'",
		"etcd://h1:99999/":                        "port",
		"etcd://:secret@h1/":                      "user name",
	} {
		_, err := etcdlock.ParseForTest(raw)
		if !errors.Is(err, backend.ErrInvalidConfig) {
			t.Errorf("%s: err = %v, want ErrInvalidConfig", raw, err)
			continue
		}
		if !strings.Contains(err.Error(), part) {
			t.Errorf("%s: error %q does not name %q", raw, err, part)
		}
		if strings.Contains(err.Error(), "secret") {
			t.Errorf("%s: error %q shows the password", raw, err)
		}
	}
}

func TestOpenUnreachable(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_, err := distlock.Open(ctx, "etcd://user:secret@127.0.0.1:1/?dial_timeout=200ms")
	if !errors.Is(err, backend.ErrUnavailable) {
		t.Fatalf("Open of a closed port = %v, want ErrUnavailable", err)
	}
	if strings.Contains(err.Error(), "secret") {
		t.Errorf("error %q shows the password", err)
	}
}

// TestTryAcquireUnreachable: with the cluster gone after Open, TryAcquire
// fails within its ctx with an error matching ErrUnavailable (the etcd
// client waits for a connection instead of failing; issue 12, item 9).
func TestTryAcquireUnreachable(t *testing.T) {
	if testing.Short() {
		t.Skip("starts an etcd server")
	}
	g := sandbox.StartT(t, sandbox.Spec{Kind: sandbox.Etcd})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	l, err := distlock.Open(ctx, g.URL()+"/unreachable")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	if err := g.Node(0).Stop(ctx); err != nil {
		t.Fatal(err)
	}
	const bound = 2 * time.Second
	tctx, tcancel := context.WithTimeout(context.Background(), bound)
	defer tcancel()
	t0 := time.Now()
	le, err := l.TryAcquire(tctx, "k")
	if err == nil {
		_ = le.Release(ctx)
		t.Fatal("TryAcquire succeeded with the server stopped")
	}
	if took := time.Since(t0); took > bound+time.Second {
		t.Errorf("TryAcquire took %v, beyond its ctx's %v", took, bound)
	}
	if !errors.Is(err, distlock.ErrUnavailable) {
		t.Errorf("TryAcquire with the server stopped = %v, want an error matching ErrUnavailable", err)
	}
}
