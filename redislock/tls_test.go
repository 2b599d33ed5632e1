package redislock

import (
	"errors"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/distlock/distlock"
	"github.com/distlock/distlock/sandbox"
)

// rediss returns the rediss:// URL of addr with params (name, value, ...).
func rediss(addr string, params ...string) string {
	q := url.Values{}
	for i := 0; i+1 < len(params); i += 2 {
		q.Set(params[i], params[i+1])
	}
	u := "rediss://" + addr
	if len(q) > 0 {
		u += "?" + q.Encode()
	}
	return u
}

// TestTLS runs the lock over rediss:// against a Redis that serves TLS
// only, and checks the errors of every way the TLS setup can be wrong.
func TestTLS(t *testing.T) {
	g := sandbox.StartT(t, sandbox.Spec{Kind: sandbox.Redis, TLS: true})
	files, ok := g.TLSFiles()
	if !ok {
		t.Fatal("a TLS group has no TLS files")
	}
	addr := g.Node(0).Addr()
	ctx := testCtx(t, time.Minute)
	// Another throwaway CA and a client certificate it signed: nothing on
	// the sandbox server trusts or is signed by it.
	bad, err := sandbox.WriteCerts(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	badCA, badCert, badKey := bad.CA, bad.ClientCert, bad.ClientKey

	t.Run("tls_ca", func(t *testing.T) {
		if !strings.HasPrefix(g.URL(), "rediss://") || !strings.Contains(g.URL(), "tls_ca=") {
			t.Fatalf("the group's URL %q is not rediss:// with tls_ca", g.URL())
		}
		lockSmoke(ctx, t, g.URL())
	})
	t.Run("client certificate", func(t *testing.T) {
		lockSmoke(ctx, t, rediss(addr, "tls_ca", files.CA, "tls_cert", files.ClientCert, "tls_key", files.ClientKey, "wait", "queue"))
	})
	t.Run("ACL user over TLS", func(t *testing.T) {
		admin := redis.NewClient(&redis.Options{Addr: addr, TLSConfig: g.ClientTLS()})
		defer admin.Close()
		setACLUser(ctx, t, admin, "locker", aclLockUser...)
		lockSmoke(ctx, t, withUser(t, g.URL(), "locker", aclPassword))
	})

	// try opens rawURL and takes and releases a lock; it returns the first
	// error.
	try := func(t *testing.T, rawURL string) error {
		t.Helper()
		l, err := distlock.Open(ctx, rawURL)
		if err != nil {
			return err
		}
		defer l.Close()
		start := time.Now()
		le, err := l.TryAcquire(ctx, "tls-errors")
		if took := time.Since(start); took > 5*time.Second {
			t.Errorf("TryAcquire took %v", took)
		}
		if err != nil {
			return err
		}
		return le.Release(ctx)
	}
	for _, c := range []struct {
		name, url, want string
		unavailable     bool // the error wraps ErrUnavailable (else ErrInvalidConfig)
	}{
		{"wrong CA", rediss(addr, "tls_ca", badCA), "certificate signed by unknown authority", true},
		{"system roots", rediss(addr), "certificate signed by unknown authority", true},
		{"wrong server name", rediss(addr, "tls_ca", files.CA, "tls_server_name", "redis.example"), "not redis.example", true},
		{"client certificate of another CA", rediss(addr, "tls_ca", files.CA, "tls_cert", badCert, "tls_key", badKey), "tls", true},
		{"plaintext to the TLS port", "redis://" + addr + "?read_timeout=1s&dial_timeout=1s", "", true},
		{"missing CA file", rediss(addr, "tls_ca", filepath.Join(t.TempDir(), "nope.pem")), "tls_ca", false},
		{"CA file without PEM", rediss(addr, "tls_ca", os.Args[0]), "no PEM certificate", false},
		{"tls_cert without tls_key", rediss(addr, "tls_ca", files.CA, "tls_cert", files.ClientCert), "tls_cert and tls_key go together", false},
		{"key not matching", rediss(addr, "tls_ca", files.CA, "tls_cert", files.ClientCert, "tls_key", badKey), "tls_cert/tls_key", false},
		{"tls_ca on redis://", "redis://" + addr + "?tls_ca=" + url.QueryEscape(files.CA), "rediss://", false},
	} {
		t.Run(c.name, func(t *testing.T) {
			err := try(t, c.url)
			if err == nil {
				t.Fatal("no error")
			}
			t.Logf("error: %v", err)
			if !strings.Contains(err.Error(), c.want) {
				t.Errorf("error does not contain %q", c.want)
			}
			want := distlock.ErrInvalidConfig
			if c.unavailable {
				want = distlock.ErrUnavailable
			}
			if !errors.Is(err, want) {
				t.Errorf("error does not wrap %v", want)
			}
		})
	}
}
