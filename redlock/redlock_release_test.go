package redlock

import (
	"errors"
	"net"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/distlock/distlock/backend"
	"github.com/distlock/distlock/internal/redisproto"
	"github.com/distlock/distlock/sandbox"
)

// TestRedlockReleaseMinority: a Redlock lock is held while a majority of
// nodes hold it. If its hold lapsed on a majority (expired, or lost with a
// node's data) and another owner took the key there, the first owner's
// Release finds its hold on a minority only. It must answer ErrNotHeld,
// as the Lock contract says for a lock no longer held: a nil would tell
// the caller its critical section was protected while another holder had
// the key. It still frees its own straggler, and never the other owner's
// hold.
func TestRedlockReleaseMinority(t *testing.T) {
	g := sandbox.StartT(t, sandbox.Spec{Kind: sandbox.Redis, Nodes: 3})
	ctx := testCtx(t, time.Minute)
	r, clients := nodeDriver(t, g)
	const key, ttl = "release-minority", 30 * time.Second
	lockKey := redisproto.KeysFor(DefaultPrefix, key).Lock
	req := func(owner string) backend.Request { return backend.Request{Key: key, Owner: owner, TTL: ttl} }

	t.Run("majority lapsed", func(t *testing.T) {
		a, err := r.TryAcquire(ctx, req("owner-a"))
		if err != nil {
			t.Fatal(err)
		}
		grantedEverywhere(t, ctx, clients, lockKey)
		for _, c := range clients[1:] { // owner-a's hold lapses on nodes 1 and 2
			if err := c.Del(ctx, lockKey).Err(); err != nil {
				t.Fatal(err)
			}
		}
		b, err := r.TryAcquire(ctx, req("owner-b"))
		if err != nil {
			t.Fatalf("owner-b on the majority owner-a no longer holds: %v", err)
		}
		grantedEverywhere(t, ctx, clients[1:], lockKey)
		if err := a.Lock.Release(ctx); !errors.Is(err, backend.ErrNotHeld) {
			t.Errorf("owner-a's Release with its hold on 1 of 3 nodes: %v, want ErrNotHeld", err)
		}
		if n := clients[0].Exists(ctx, lockKey).Val(); n != 0 {
			t.Errorf("owner-a's straggler on node 0 was not freed")
		}
		for i, c := range clients[1:] {
			if n := c.Exists(ctx, lockKey).Val(); n != 1 {
				t.Errorf("node %d: owner-b's hold is gone after owner-a's Release", i+1)
			}
		}
		if err := b.Lock.Refresh(ctx, ttl); err != nil {
			t.Errorf("owner-b's Refresh after owner-a's Release: %v", err)
		}
		if err := b.Lock.Release(ctx); err != nil {
			t.Errorf("owner-b's Release, held on 2 of 3 nodes: %v", err)
		}
	})

	t.Run("one node lapsed", func(t *testing.T) {
		a, err := r.TryAcquire(ctx, req("owner-a"))
		if err != nil {
			t.Fatal(err)
		}
		grantedEverywhere(t, ctx, clients, lockKey)
		if err := clients[2].Del(ctx, lockKey).Err(); err != nil {
			t.Fatal(err)
		}
		if err := a.Lock.Release(ctx); err != nil {
			t.Errorf("Release with the hold on 2 of 3 nodes: %v, want nil", err)
		}
		for i, c := range clients {
			if n := c.Exists(ctx, lockKey).Val(); n != 0 {
				t.Errorf("node %d still has the lock after Release", i)
			}
		}
	})

	t.Run("undecided", func(t *testing.T) {
		// Released on one node, not held on another, the third unreachable:
		// whether a majority held it is unknown.
		dead := redis.NewClient(&redis.Options{Addr: deadAddr(t), MaxRetries: -1, DialTimeout: time.Second})
		t.Cleanup(func() { dead.Close() })
		r2, err := New([]redis.UniversalClient{clients[0], clients[1], dead}, nil)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { r2.Close() })
		a, err := r2.TryAcquire(ctx, req("owner-c"))
		if err != nil {
			t.Fatal(err)
		}
		grantedEverywhere(t, ctx, clients[:2], lockKey)
		if err := clients[1].Del(ctx, lockKey).Err(); err != nil {
			t.Fatal(err)
		}
		err = a.Lock.Release(ctx)
		if !errors.Is(err, backend.ErrUnavailable) || errors.Is(err, backend.ErrNotHeld) {
			t.Errorf("Release released on 1, not held on 1, 1 unreachable: %v, want ErrUnavailable", err)
		}
		if n := clients[0].Exists(ctx, lockKey).Val(); n != 0 {
			t.Errorf("the hold on node 0 was not freed")
		}
	})
}

// deadAddr returns a loopback address nothing listens on.
func deadAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	return addr
}
