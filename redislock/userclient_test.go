package redislock

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/distlock/distlock"
	"github.com/distlock/distlock/backend"
	"github.com/distlock/distlock/internal/redisproto"
	"github.com/distlock/distlock/sandbox"
)

// TestNewWarnsUnboundedClient: New names, through Options.Logger, the
// client setting that keeps the client from ending calls at their ctx's
// deadline, and says nothing about a client that does.
func TestNewWarnsUnboundedClient(t *testing.T) {
	for _, tc := range []struct {
		name string
		c    redis.UniversalClient
		want []string // in the warning; none: no warning
	}{
		{"defaults", redis.NewClient(&redis.Options{Addr: "127.0.0.1:1"}), []string{"ContextTimeoutEnabled false", "ReadTimeout=5s", "options=redis.Options"}},
		{"no read timeout", redis.NewClient(&redis.Options{Addr: "127.0.0.1:1", ReadTimeout: -1}), []string{"no read timeout (ReadTimeout -1)", "without bound", "ReadTimeout=0s"}},
		{"deadlines disabled", redis.NewClient(&redis.Options{Addr: "127.0.0.1:1", ReadTimeout: -2, ContextTimeoutEnabled: true}), []string{"no read or write deadlines", "without bound", "ContextTimeoutEnabled=true"}},
		{"cluster defaults", redis.NewClusterClient(&redis.ClusterOptions{Addrs: []string{"127.0.0.1:1"}}), []string{"ContextTimeoutEnabled false", "options=redis.ClusterOptions", "ReadTimeout=5s"}},
		{"ctx deadlines honoured", redis.NewClient(&redis.Options{Addr: "127.0.0.1:1", ContextTimeoutEnabled: true}), nil},
		{"cluster ctx deadlines honoured", redis.NewClusterClient(&redis.ClusterOptions{Addrs: []string{"127.0.0.1:1"}, ContextTimeoutEnabled: true}), nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			defer tc.c.Close()
			var buf bytes.Buffer
			d, err := New(tc.c, &Options{Logger: slog.New(slog.NewTextHandler(&buf, nil))})
			if err != nil {
				t.Fatal(err)
			}
			defer d.Close()
			got := buf.String()
			if tc.want == nil {
				if got != "" {
					t.Fatalf("New logged %q for a client that ends calls at their ctx's deadline", got)
				}
				return
			}
			if !strings.Contains(got, "level=WARN") || strings.Count(got, "\n") != 1 {
				t.Fatalf("New logged %q, want one warning", got)
			}
			for _, w := range tc.want {
				if !strings.Contains(got, w) {
					t.Errorf("warning %q does not say %q", got, w)
				}
			}
		})
	}
	t.Run("Redlock", func(t *testing.T) {
		a := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1"})
		b := redis.NewClient(&redis.Options{Addr: "127.0.0.1:2", ContextTimeoutEnabled: true})
		defer a.Close()
		defer b.Close()
		var buf bytes.Buffer
		r, err := newRedlock([]redis.UniversalClient{a, b}, &redlockOptions{Logger: slog.New(slog.NewTextHandler(&buf, nil))})
		if err != nil {
			t.Fatal(err)
		}
		defer r.Close()
		if got := buf.String(); strings.Count(got, "\n") != 1 || !strings.Contains(got, "node=0") || !strings.Contains(got, "ContextTimeoutEnabled false") {
			t.Fatalf("redlock.New logged %q, want one warning, about node 0", got)
		}
	})
	t.Run("URL", func(t *testing.T) {
		cfg, err := redisproto.ParseConfig(mustParseURL(t, "redis://127.0.0.1:1"))
		if err != nil {
			t.Fatal(err)
		}
		c := redis.NewClient(cfg.Single("127.0.0.1:1"))
		defer c.Close()
		if b := redisproto.BoundsOf(c); b.Detach {
			t.Fatalf("Open's clients do not end calls at their ctx's deadline: %+v", b)
		}
	})
}

func mustParseURL(t *testing.T, s string) *backend.URL {
	t.Helper()
	u, err := backend.ParseURL(s)
	if err != nil {
		t.Fatal(err)
	}
	return u
}

// userStall is a holder over a client made with go-redis's defaults
// (only Addr), reaching a sandbox server through a proxy the test can
// stall both ways, and an admin client that reaches the server directly.
type userStall struct {
	proxy *sandbox.Proxy
	user  *redis.Client
	admin *redis.Client
	d     *Driver
}

func newUserStall(t *testing.T) *userStall {
	t.Helper()
	g := sandbox.StartT(t, sandbox.Spec{Kind: sandbox.Redis})
	n := g.Node(0)
	p := sandbox.StartProxyT(t, n.Addr)
	s := &userStall{proxy: p, user: redis.NewClient(&redis.Options{Addr: p.Addr()}), admin: nodeClient(n)}
	t.Cleanup(func() { s.user.Close(); s.admin.Close() })
	if rt := s.user.Options().ReadTimeout; rt != 5*time.Second || s.user.Options().ContextTimeoutEnabled {
		t.Fatalf("go-redis's defaults changed: ReadTimeout %v, ContextTimeoutEnabled %v", rt, s.user.Options().ContextTimeoutEnabled)
	}
	d, err := New(s.user, &Options{Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	s.d = d
	return s
}

// TestUserClientStallEndsLeaseAtDeadline is issue 27's scenario: a lease
// of 3 s over a client with go-redis's defaults (ReadTimeout 5 s,
// ContextTimeoutEnabled false), and the holder's path to the server
// stalled both ways. Done must close no later than Deadline() plus a
// small allowance, and Deadline() must come before the key's expiry in
// Redis (read from its PTTL during the stall): nobody else can be granted
// the lock while the lease is live. Before the driver bounded its calls
// (and without the portable layer's deadline timer) Done closed when the
// stuck renewal returned, at the ReadTimeout: 6 s into the stall, 3 s
// after Deadline(), the key gone from Redis 3 s earlier.
func TestUserClientStallEndsLeaseAtDeadline(t *testing.T) {
	s := newUserStall(t)
	const ttl = 3 * time.Second
	l := distlock.New(s.d, distlock.WithDefaultTTL(ttl))
	defer l.Close()
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	le, err := l.Acquire(ctx, "stall")
	if err != nil {
		t.Fatal(err)
	}
	lockKey := redisproto.KeysFor(DefaultPrefix, "stall").Lock
	s.proxy.Blackhole(sandbox.Both)
	stalled := time.Now()
	defer s.proxy.Heal()
	// The key's expiry in Redis: nothing renews it during the stall. The
	// server read its PTTL no earlier than asked, so it expires no earlier
	// than asked+PTTL (less PTTL's rounding to the millisecond).
	asked := time.Now()
	pttl, err := s.admin.PTTL(ctx, lockKey).Result()
	if err != nil || pttl <= 0 {
		t.Fatalf("PTTL %v: %v", pttl, err)
	}
	expires := asked.Add(pttl - time.Millisecond)

	select {
	case <-le.Done():
	case <-time.After(3 * ttl):
		t.Fatalf("Done still open %v into the stall (deadline was %v after it began)", 3*ttl, le.Deadline().Sub(stalled))
	}
	ended := time.Now()
	dl := le.Deadline()
	t.Logf("Done closed %v into the stall, %v after Deadline(); the key expires in Redis %v after Deadline()",
		ended.Sub(stalled).Round(time.Millisecond), ended.Sub(dl).Round(time.Millisecond), expires.Sub(dl).Round(time.Millisecond))
	if late := max(100*time.Millisecond, ttl/10); ended.After(dl.Add(late)) {
		t.Errorf("Done closed %v after Deadline() (allowed %v), %v after the key expired in Redis", ended.Sub(dl).Round(time.Millisecond), late, ended.Sub(expires).Round(time.Millisecond))
	}
	if !dl.Before(expires) {
		t.Errorf("Deadline() is %v after the key's expiry in Redis", dl.Sub(expires))
	}
	if !errors.Is(le.Err(), distlock.ErrLost) {
		t.Errorf("Err() = %v, want ErrLost", le.Err())
	}
	for {
		n, err := s.admin.Exists(ctx, lockKey).Result()
		if err != nil {
			t.Fatal(err)
		}
		if n == 0 {
			t.Logf("the key was gone from Redis when looked up %v after Done closed", time.Since(ended).Round(time.Millisecond))
			break
		}
		if time.Since(expires) > 10*time.Second {
			t.Fatalf("the key is still in Redis %v after its expiry", time.Since(expires))
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// TestUserClientStallCallsEndByCtx: with the server's path stalled both
// ways, Release, TryAcquire and Acquire over a client with go-redis's
// defaults return by their ctx's deadline (not at the client's 5 s
// ReadTimeout), with ErrUnavailable and the ctx's error; an acquisition
// first waits up to redisproto.CleanupTimeout for its call, to give back what it may
// have taken before it returns, as on any client. The grant an abandoned
// acquisition brings back once the path heals is given back.
func TestUserClientStallCallsEndByCtx(t *testing.T) {
	s := newUserStall(t)
	l := distlock.New(s.d, distlock.WithDefaultTTL(time.Minute))
	defer l.Close()
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	const bound = 300 * time.Millisecond
	const allowance = 200 * time.Millisecond
	timed := func(what string, extra time.Duration, f func(ctx context.Context) error) error {
		t.Helper()
		cctx, cancel := context.WithTimeout(ctx, bound)
		defer cancel()
		start := time.Now()
		err := f(cctx)
		took := time.Since(start)
		t.Logf("%s: returned after %v: %v", what, took.Round(time.Millisecond), err)
		if took > bound+extra+allowance {
			t.Errorf("%s with a %v ctx returned after %v (allowed %v)", what, bound, took.Round(time.Millisecond), bound+extra+allowance)
		}
		return err
	}

	le, err := l.Acquire(ctx, "release")
	if err != nil {
		t.Fatal(err)
	}
	s.proxy.Blackhole(sandbox.Both)
	err = timed("Release", 0, le.Release)
	if !errors.Is(err, context.DeadlineExceeded) && !errors.Is(err, distlock.ErrUnavailable) {
		t.Errorf("Release: %v, want ErrUnavailable or the ctx's error", err)
	}
	for _, what := range []string{"TryAcquire", "Acquire"} {
		key := "acq-" + what
		err := timed(what, redisproto.CleanupTimeout, func(ctx context.Context) error {
			var err error
			if what == "TryAcquire" {
				_, err = l.TryAcquire(ctx, key)
			} else {
				_, err = l.Acquire(ctx, key)
			}
			return err
		})
		if err == nil {
			t.Fatalf("%s through a stalled path succeeded", what)
		}
	}
	s.proxy.Heal()
	// The requests held back by the stall reach the server now: the
	// acquisitions grant, their late replies are given back (the TTL is a
	// minute, so only that frees the keys within the bound).
	for _, key := range []string{"acq-TryAcquire", "acq-Acquire"} {
		lockKey := redisproto.KeysFor(DefaultPrefix, key).Lock
		deadline := time.Now().Add(20 * time.Second)
		for {
			n, err := s.admin.Exists(ctx, lockKey).Result()
			if err != nil {
				t.Fatal(err)
			}
			if n == 0 {
				break
			}
			if time.Now().After(deadline) {
				pttl := s.admin.PTTL(ctx, lockKey).Val()
				t.Fatalf("%s: the abandoned acquisition's grant was not given back (PTTL %v)", key, pttl)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
}
