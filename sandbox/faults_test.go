package sandbox_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/distlock/distlock/sandbox"
)

// Faults: pause/resume, kill and stop/start on real servers.

func TestRedisPauseResume(t *testing.T) {
	g := start(t, sandbox.Spec{Kind: sandbox.Redis})
	ctx := testCtx(t, time.Minute)
	n := g.Node(0)
	c := redisClient(t, n.Addr())
	if err := c.Ping(ctx).Err(); err != nil {
		t.Fatal(err)
	}
	if err := n.Pause(ctx); err != nil {
		t.Fatal(err)
	}
	short, cancel := context.WithTimeout(ctx, 500*time.Millisecond)
	err := c.Ping(short).Err()
	cancel()
	if err == nil {
		t.Fatal("PING answered while paused")
	}
	if err := n.Resume(ctx); err != nil {
		t.Fatal(err)
	}
	if err := pingUntil(ctx, n.Addr()); err != nil {
		t.Fatalf("PING after resume: %v", err)
	}
}

func TestRedisKillStartPersistent(t *testing.T) {
	g := start(t, sandbox.Spec{Kind: sandbox.Redis, Persistent: true})
	ctx := testCtx(t, 2*time.Minute)
	n := g.Node(0)
	if err := redisClient(t, n.Addr()).Set(ctx, "k", "v", 0).Err(); err != nil {
		t.Fatal(err)
	}
	if err := n.Kill(ctx); err != nil {
		t.Fatal(err)
	}
	short, cancel := context.WithTimeout(ctx, time.Second)
	err := redisClient(t, n.Addr()).Ping(short).Err()
	cancel()
	if err == nil {
		t.Fatal("PING answered after Kill")
	}
	// Killing twice is harmless.
	if err := n.Kill(ctx); err != nil {
		t.Fatalf("second Kill: %v", err)
	}
	if err := n.Start(ctx); err != nil {
		t.Fatal(err)
	}
	t.Logf("address after restart: %s", n.Addr())
	got, err := redisClient(t, n.Addr()).Get(ctx, "k").Result()
	if err != nil || got != "v" {
		t.Fatalf("GET after kill+start = %q, %v; the append-only file should keep it", got, err)
	}
}

func TestEtcdStopStartKeepsData(t *testing.T) {
	g := start(t, sandbox.Spec{Kind: sandbox.Etcd})
	ctx := testCtx(t, 2*time.Minute)
	n := g.Node(0)
	if _, err := etcdClient(t, []string{n.Addr()}).Put(ctx, "k", "v"); err != nil {
		t.Fatal(err)
	}
	if err := n.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	if err := n.Start(ctx); err != nil {
		t.Fatal(err)
	}
	resp, err := etcdClient(t, []string{n.Addr()}).Get(ctx, "k")
	if err != nil || len(resp.Kvs) != 1 || string(resp.Kvs[0].Value) != "v" {
		t.Fatalf("get after stop+start = %v, %v", resp, err)
	}
}

func TestZooKeeperPauseResume(t *testing.T) {
	g := start(t, sandbox.Spec{Kind: sandbox.ZooKeeper})
	ctx := testCtx(t, time.Minute)
	n := g.Node(0)
	if err := n.Pause(ctx); err != nil {
		t.Fatal(err)
	}
	if err := g.Wait(withTimeout(t, ctx, 700*time.Millisecond)); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Wait on a paused server = %v, want a deadline error", err)
	}
	if err := n.Resume(ctx); err != nil {
		t.Fatal(err)
	}
	if err := g.Wait(ctx); err != nil {
		t.Fatalf("Wait after resume: %v", err)
	}
}

// A paused PostgreSQL answers nothing; its connections outlive the pause.
func TestPostgresPauseResume(t *testing.T) {
	g := start(t, sandbox.Spec{Kind: sandbox.Postgres})
	ctx := testCtx(t, time.Minute)
	n := g.Node(0)
	asked, idle := pgConn(t, ctx, g.URL()), pgConn(t, ctx, g.URL())
	if err := n.Pause(ctx); err != nil {
		t.Fatal(err)
	}
	var one int
	if err := asked.QueryRow(withTimeout(t, ctx, 500*time.Millisecond), "SELECT 1").Scan(&one); err == nil {
		t.Fatal("SELECT 1 answered while paused")
	}
	if err := n.Resume(ctx); err != nil {
		t.Fatal(err)
	}
	if err := idle.QueryRow(ctx, "SELECT 1").Scan(&one); err != nil {
		t.Fatalf("SELECT 1 after resume on a connection opened before the pause: %v", err)
	}
	if err := g.Wait(ctx); err != nil {
		t.Fatalf("Wait after resume: %v", err)
	}
}

func TestGroupClose(t *testing.T) {
	g := start(t, sandbox.Spec{Kind: sandbox.Redis})
	addr := g.Node(0).Addr()
	if err := g.Close(); err != nil {
		t.Fatal(err)
	}
	if err := g.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
	ctx := testCtx(t, 5*time.Second)
	if err := redisClient(t, addr).Ping(ctx).Err(); err == nil {
		t.Fatal("server answers after Close")
	}
}

func pingUntil(ctx context.Context, addr string) error {
	for {
		c := newQuietRedis(addr)
		err := c.Ping(ctx).Err()
		c.Close()
		if err == nil || ctx.Err() != nil {
			return err
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
}

func withTimeout(t *testing.T, ctx context.Context, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(ctx, d)
	t.Cleanup(cancel)
	return ctx
}
