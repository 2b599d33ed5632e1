package peers

import (
	"context"
	"errors"
	"io"
	"net"
	"slices"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/distlock/distlock/sandbox"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestFor(t *testing.T) {
	for _, raw := range []string{"mem://x", "redis://a:1,b:2/0", "rediss://h:1/0", "mysql://u:p@h:1/db?tls=true", "zks://h:1/x"} {
		if _, err := For(raw); !errors.Is(err, ErrNoPeers) {
			t.Errorf("For(%q) = %v, want ErrNoPeers", raw, err)
		}
	}
	st, err := For("redis://127.0.0.1:1/0")
	if err != nil || len(st.Peers) != 2 || st.Floor.Name != "PING" || st.Floor.Crash != nil {
		t.Fatalf("For(redis) = %+v, %v", st, err)
	}
	for _, p := range st.Peers {
		if p.New == nil || p.Crash == nil || p.About == "" {
			t.Errorf("peer %q is missing a part", p.Name)
		}
	}
	if st.Distlock.New == nil {
		t.Error("For(redis) has no distlock made by New")
	}
	// distlock made by New would not have a URL's options.
	if st, err := For("redis://127.0.0.1:1/0?pool_size=3"); err != nil || st.Distlock.New != nil {
		t.Errorf("For(redis with an option) = %+v, %v; want no distlock made by New", st, err)
	}
	st, err = For("redis://127.0.0.1:1,127.0.0.1:2,127.0.0.1:3?mode=redlock")
	if err != nil || len(st.Peers) != 1 || st.Floor.Name != "PING ×3" || st.Distlock.New == nil {
		t.Fatalf("For(redlock) = %+v, %v", st, err)
	}
}

// A cut client's connections close at once, and it cannot dial again.
func TestCutter(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	accepted := make(chan net.Conn, 1)
	go func() {
		c, err := ln.Accept()
		if err == nil {
			accepted <- c
		}
		close(accepted)
	}()
	cut := &cutter{}
	c, err := cut.dial(context.Background(), "tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	server := <-accepted
	defer server.Close()
	cut.cutAll()
	_ = server.SetReadDeadline(time.Now().Add(5 * time.Second))
	if _, err := server.Read(make([]byte, 1)); err != io.EOF {
		t.Errorf("the server read %v from a cut connection, want EOF", err)
	}
	if _, err := c.Write([]byte("x")); err == nil {
		t.Error("writing to a cut connection worked")
	}
	if _, err := cut.dial(context.Background(), "tcp", ln.Addr().String()); !errors.Is(err, errCut) {
		t.Errorf("dial after the cut = %v, want errCut", err)
	}
}

func TestRedis(t *testing.T) { checkStore(t, sandbox.Spec{Kind: sandbox.Redis}, "") }
func TestRedlock(t *testing.T) {
	checkStore(t, sandbox.Spec{Kind: sandbox.Redis, Nodes: 3}, "?mode=redlock")
}
func TestMySQL(t *testing.T)     { checkStore(t, sandbox.Spec{Kind: sandbox.MariaDB}, "") }
func TestZooKeeper(t *testing.T) { checkStore(t, sandbox.Spec{Kind: sandbox.ZooKeeper}, "") }
func TestEtcd(t *testing.T)      { checkStore(t, sandbox.Spec{Kind: sandbox.Etcd}, "") }

// ttl is the lease of the crash checks: a crashed holder's lock must be
// free within a few of them.
const ttl = time.Second

// checkStore checks, on a real server of kind, that the server describes
// itself, the floor makes a round trip, and each peer excludes a second
// client until it releases, and frees a crashed holder's lock.
func checkStore(t *testing.T, spec sandbox.Spec, query string) {
	if testing.Short() {
		t.Skip("starts a server")
	}
	g := sandbox.StartT(t, spec)
	st, err := For(g.URL() + query)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	info, err := st.Info(ctx)
	if err != nil || info.Version == "" {
		t.Errorf("Info = %+v, %v", info, err)
	}
	f, err := st.Floor.New(ctx, ttl)
	if err != nil {
		t.Fatal(err)
	}
	req0, _, err := st.Counters(ctx)
	if err != nil {
		t.Fatalf("Counters: %v", err)
	}
	const trips = 5
	for range trips {
		if release, err := f.Acquire(ctx, "k"); err != nil || release(ctx) != nil {
			t.Errorf("floor %s: %v", st.Floor.Name, err)
		}
	}
	f.Close()
	// The server counted the floor's round trips (and this reading's).
	if req1, fsyncs, err := st.Counters(ctx); err != nil || req1-req0 < trips || fsyncs < 0 {
		t.Errorf("Counters after %d floor round trips: %v more requests, fsyncs %v, %v", trips, req1-req0, fsyncs, err)
	}
	t.Run("distlock", func(t *testing.T) {
		if st.Distlock.New == nil || st.Distlock.About == "" || st.Distlock.Crash != nil {
			t.Fatalf("Distlock = %+v", st.Distlock)
		}
		checkExcludes(ctx, t, st.Distlock)
	})
	for _, p := range append(slices.Clone(st.Fenced), st.Peers...) {
		t.Run(strings.ReplaceAll(p.Name, "/", "-"), func(t *testing.T) {
			checkExcludes(ctx, t, p)
			checkCrash(ctx, t, p)
		})
	}
}

func checkExcludes(ctx context.Context, t *testing.T, p Peer) {
	key := "peers-test/excl/" + time.Now().Format("150405.000000")
	a, b := newClient(ctx, t, p), newClient(ctx, t, p)
	release, err := a.Acquire(ctx, key)
	if err != nil {
		t.Fatal(err)
	}
	short, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
	if rb, err := b.Acquire(short, key); err == nil {
		t.Error("a second client got a held lock")
		_ = rb(ctx)
	}
	cancel()
	if err := release(ctx); err != nil {
		t.Fatal(err)
	}
	c := newClient(ctx, t, p)
	rc, err := c.Acquire(ctx, key)
	if err != nil {
		t.Fatalf("after the release: %v", err)
	}
	_ = rc(ctx)
}

func checkCrash(ctx context.Context, t *testing.T, p Peer) {
	key := "peers-test/crash/" + time.Now().Format("150405.000000")
	died, err := p.Crash(ctx, key, ttl)
	if err != nil {
		t.Fatal(err)
	}
	waiter := newClient(ctx, t, p)
	wctx, cancel := context.WithTimeout(ctx, 4*ttl+5*time.Second)
	defer cancel()
	release, err := waiter.Acquire(wctx, key)
	if err != nil {
		t.Fatalf("%v after the holder crashed: %v", time.Since(died), err)
	}
	t.Logf("recovery %v", time.Since(died))
	_ = release(ctx)
}

func newClient(ctx context.Context, t *testing.T, p Peer) interface {
	Acquire(context.Context, string) (func(context.Context) error, error)
} {
	x, err := p.New(ctx, ttl)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(x.Close)
	return x
}
func TestPostgres(t *testing.T) { checkStore(t, sandbox.Spec{Kind: sandbox.Postgres}, "") }
