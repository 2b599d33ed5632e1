package redlock

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/distlock/distlock"
	"github.com/distlock/distlock/backend"
	"github.com/distlock/distlock/internal/redisproto"
	"github.com/distlock/distlock/sandbox"
)

// TestRedlockFairOrder: Redlock waiters, each its own driver (as separate
// processes), that started waiting one after the other get the lock in
// that order, each from its predecessor's release, with strictly
// increasing tokens. A waiter counts as waiting once it is queued on the
// first node, or (notify mode) subscribed to the key's releases there; the
// test starts the next one only then, so the order asserted is the arrival
// order, with no timing assumption.
func TestRedlockFairOrder(t *testing.T) {
	g := sandbox.StartT(t, sandbox.Spec{Kind: sandbox.Redis, Nodes: 3})
	ctx := testCtx(t, time.Minute)
	const key, waiters = "fair-order", 5
	locker := func() *distlock.Locker {
		r, _ := nodeDriver(t, g)
		l := distlock.New(r, distlock.WithDefaultTTL(10*time.Second))
		t.Cleanup(func() { _ = l.Close() })
		return l
	}
	first := nodeClient(g.Node(0))
	t.Cleanup(func() { first.Close() })
	ks := redisproto.KeysFor(DefaultPrefix, key)
	waiting := func() int64 {
		q := first.ZCard(ctx, ks.Queue).Val()
		subs := first.PubSubNumSub(ctx, ks.Channel).Val()[ks.Channel]
		return q + subs
	}

	holder, err := locker().Acquire(ctx, key)
	if err != nil {
		t.Fatal(err)
	}
	type grant struct {
		who   int
		token uint64
		err   error
	}
	got := make(chan grant, waiters)
	var done sync.WaitGroup
	defer done.Wait() // every release returned before the drivers close
	for i := range waiters {
		l := locker()
		done.Add(1)
		go func() {
			defer done.Done()
			le, err := l.Acquire(ctx, key)
			if err != nil {
				got <- grant{who: i, err: err}
				return
			}
			got <- grant{who: i, token: le.Token()}
			if err := le.Release(ctx); err != nil {
				t.Errorf("waiter %d: release: %v", i, err)
			}
		}()
		for deadline := time.Now().Add(10 * time.Second); waiting() < int64(i+1); {
			if time.Now().After(deadline) {
				t.Fatalf("waiter %d never showed as waiting on the first node (%d waiting)", i, waiting())
			}
			time.Sleep(2 * time.Millisecond)
		}
	}
	if err := holder.Release(ctx); err != nil {
		t.Fatal(err)
	}
	var order []int
	last := holder.Token()
	for range waiters {
		gr := <-got
		if gr.err != nil {
			t.Fatalf("waiter %d: %v", gr.who, gr.err)
		}
		if gr.token <= last {
			t.Errorf("waiter %d got token %d after %d", gr.who, gr.token, last)
		}
		last = gr.token
		order = append(order, gr.who)
	}
	if fmt.Sprint(order) != fmt.Sprint([]int{0, 1, 2, 3, 4}) {
		t.Errorf("grants went to the waiters in the order %v, want their arrival order [0 1 2 3 4]", order)
	}
}

// TestRedlockQueueFirstNodeDown: with the first node stopped, a waiter
// falls back to notify mode and still gets the lock from the majority
// when the holder releases; a waiter canceled meanwhile leaves nothing
// held on any node.
func TestRedlockQueueFirstNodeDown(t *testing.T) {
	g := sandbox.StartT(t, sandbox.Spec{Kind: sandbox.Redis, Nodes: 3})
	ctx := testCtx(t, time.Minute)
	const key = "first-down"
	locker := func() *distlock.Locker {
		r, _ := nodeDriver(t, g)
		l := distlock.New(r, distlock.WithDefaultTTL(10*time.Second))
		t.Cleanup(func() { _ = l.Close() })
		return l
	}
	a, b, c := locker(), locker(), locker()
	holder, err := a.Acquire(ctx, key)
	if err != nil {
		t.Fatal(err)
	}
	if err := g.Node(0).Stop(ctx); err != nil {
		t.Fatal(err)
	}
	// A canceled waiter leaves no hold behind.
	cctx, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
	if _, err := c.Acquire(cctx, key); err == nil {
		t.Fatal("a waiter got a held lock")
	}
	cancel()
	got := make(chan error, 1)
	go func() {
		le, err := b.Acquire(ctx, key)
		if err == nil {
			if le.Token() <= holder.Token() {
				err = fmt.Errorf("token %d after %d", le.Token(), holder.Token())
			}
			_ = le.Release(ctx)
		}
		got <- err
	}()
	if err := holder.Release(ctx); err != nil {
		t.Logf("release with the first node down: %v", err)
	}
	if err := <-got; err != nil {
		t.Fatalf("waiter with the first node down: %v", err)
	}
	for i, n := range g.Nodes()[1:] {
		cl := nodeClient(n)
		defer cl.Close()
		if o := cl.HGet(ctx, redisproto.KeysFor(DefaultPrefix, key).Lock, "o").Val(); o != "" {
			t.Errorf("node %d: lock still held by %q after every holder released", i+1, o)
		}
	}
}

// TestRedlockQueueStaleFirstNode: a lock left on the first node alone (the
// holder's other nodes lost it; say its release failed there) must not
// block a waiter for its whole TTL while a majority is free: the waiter's
// redisproto.Heartbeat attempt takes the majority, with a token above the stale one,
// and leaves the first node's queue.
func TestRedlockQueueStaleFirstNode(t *testing.T) {
	g := sandbox.StartT(t, sandbox.Spec{Kind: sandbox.Redis, Nodes: 3})
	ctx := testCtx(t, time.Minute)
	r, clients := nodeDriver(t, g)
	const key = "stale-first"
	ks := redisproto.KeysFor(DefaultPrefix, key)
	a, err := r.TryAcquire(ctx, backend.Request{Key: key, Owner: "owner-a", TTL: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	grantedEverywhere(t, ctx, clients, ks.Lock)
	for _, c := range clients[1:] {
		if err := c.Del(ctx, ks.Lock).Err(); err != nil {
			t.Fatal(err)
		}
	}
	// Well before the stale lock's minute runs out.
	wctx, cancel := context.WithTimeout(ctx, 15*time.Second)
	defer cancel()
	b, err := r.Wait(wctx, backend.Request{Key: key, Owner: "owner-b", TTL: 300 * time.Millisecond})
	if err != nil {
		t.Fatalf("a waiter stayed blocked by a lock left on the first node alone: %v", err)
	}
	if b.Token <= a.Token {
		t.Errorf("token %d after the stale lock's %d", b.Token, a.Token)
	}
	if n := clients[0].ZCard(ctx, ks.Queue).Val(); n != 0 {
		t.Errorf("the granted waiter left %d entries in the first node's queue", n)
	}
	if err := b.Lock.Release(ctx); err != nil {
		t.Fatal(err)
	}
}
