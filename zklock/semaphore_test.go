package zklock

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/distlock/distlock/backend"
)

func semReq(key string, permits, limit int) backend.Request {
	return backend.Request{Kind: backend.Permits, Key: key, Owner: "o-" + newGUID()[:8], TTL: 10 * time.Second, Limit: limit, Permits: permits}
}

// mustPermits is d's tryPermits of req, failing t if it is not granted.
func mustPermits(ctx context.Context, t *testing.T, d *Driver, req backend.Request) backend.Grant {
	t.Helper()
	g, err := d.tryPermits(ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	return g
}

// TestSemaphoreNames: only names semNamePrefix makes are queue entries.
func TestSemaphoreNames(t *testing.T) {
	g := newGUID()
	good := semNamePrefix(g, 2, 5) + "0000000042"
	e, ok := parseSemName(good)
	if !ok || e.permits != 2 || e.limit != 5 || e.seq != 42 {
		t.Fatalf("parseSemName(%q) = %+v, %v", good, e, ok)
	}
	for _, bad := range []string{
		nodeName(g, 42), // a lock's node
		semNamePrefix(g, 2, 5) + "42",
		semNamePrefix(g, 6, 5) + "0000000042", // more permits than the limit
		semNamePrefix(g, 0, 5) + "0000000042",
		semNamePrefix(g, 1, backend.MaxSemaphoreLimit+1) + "0000000042",
		protectedPrefix + g + semMarker + "02-5-0000000042", // not canonical
		protectedPrefix + g + semMarker + "2-5-00000000x2",
		protectedPrefix + g[:31] + "G" + semMarker + "2-5-0000000042",
	} {
		if _, ok := parseSemName(bad); ok {
			t.Errorf("parseSemName(%q) accepted it", bad)
		}
	}
	if guidOf(good) != g || guidOf(nodeName(g, 1)) != g {
		t.Error("guidOf does not find the guid of a semaphore's or a lock's node")
	}
}

// TestSemaphoreHolding: the holders are the prefix of the queue whose
// permits fit each one's own limit.
func TestSemaphoreHolding(t *testing.T) {
	q := func(pl ...int) []semEntry {
		var out []semEntry
		for i := 0; i < len(pl); i += 2 {
			out = append(out, semEntry{permits: pl[i], limit: pl[i+1]})
		}
		return out
	}
	for _, c := range []struct {
		q    []semEntry
		want int
	}{
		{q(), 0},
		{q(1, 3, 1, 3, 1, 3, 1, 3), 3},
		{q(2, 3, 2, 3, 1, 3), 1},          // fair: the 1 behind the waiting 2 waits
		{q(1, 3, 1, 3, 1, 3, 1, 2), 3},    // a lowered limit admits no one while 3 are held
		{q(1, 3, 1, 2, 1, 5), 3},          // the lowered limit fits the one ahead
		{q(2, 2, 2, 2, 1, 5), 1},          // a larger limit does not overtake a waiter
		{q(1, 5, 1, 5, 1, 5, 2, 5), 4},    // up to the limit
		{q(3, 3, 1, 10, 1, 10), 3},        // a raised limit admits at once
		{q(1, 10, 1, 10, 1, 1, 1, 10), 2}, // a waiter for 1 of 1 blocks the line
	} {
		if got := holding(c.q); got != c.want {
			t.Errorf("holding(%v) = %d, want %d", c.q, got, c.want)
		}
	}
}

// TestSemaphoreRoundTrips counts the requests of uncontended permits on
// the server (docs/primitives.md quotes them): an acquisition that holds
// is 2 (the create's multi, one read of the queue), a release 1 (the
// delete), and a try that finds the permits taken 3 (it deletes its node
// again).
func TestSemaphoreRoundTrips(t *testing.T) {
	c, ctx, d, _ := countedDriver(t)
	key := uniqueKey(t)
	warm := mustPermits(ctx, t, d, semReq(key, 1, 2)) // creates the container
	addr := c.g.Addrs()[0]
	const rounds = 5
	var acq, refused, rel int
	for range rounds {
		before := packetsReceived(t, addr)
		g := mustPermits(ctx, t, d, semReq(key, 1, 2))
		mid := packetsReceived(t, addr)
		if _, err := d.tryPermits(ctx, semReq(key, 1, 2)); !errors.Is(err, backend.ErrNotAcquired) {
			t.Fatalf("a third permit of 2: %v, want ErrNotAcquired", err)
		}
		mid2 := packetsReceived(t, addr)
		if err := g.Lock.Release(ctx); err != nil {
			t.Fatal(err)
		}
		after := packetsReceived(t, addr)
		// Each interval holds one mntr command of packetsReceived's.
		acq, refused, rel = acq+mid-before-1, refused+mid2-mid-1, rel+after-mid2-1
	}
	t.Logf("requests per operation over %d rounds: acquire %d, refused try %d, release %d", rounds, acq, refused, rel)
	for _, c := range []struct {
		what      string
		got, want int
	}{{"acquire", acq, 2}, {"refused try", refused, 3}, {"release", rel, 1}} {
		if c.got < c.want*rounds || c.got > c.want*rounds+2 { // a ping or two may fall in
			t.Errorf("%d of %s sent %d requests, want %d each", rounds, c.what, c.got, c.want)
		}
	}
	_ = warm.Lock.Release(ctx)
}

// TestSemaphoreNoHerd: waiters follow the nodes ahead of them by watches,
// so a release costs the release itself and one read by the waiter it
// admits, however many others wait; and they are served in arrival order.
func TestSemaphoreNoHerd(t *testing.T) {
	c, ctx, d, _ := countedDriver(t)
	key := uniqueKey(t)
	holder := mustPermits(ctx, t, d, semReq(key, 1, 1))
	const waiters = 6
	granted := make(chan int, waiters)
	grants := make([]backend.Grant, waiters)
	var wg sync.WaitGroup
	for i := range waiters {
		wg.Go(func() {
			g, err := d.waitPermits(ctx, semReq(key, 1, 1))
			if err != nil {
				t.Errorf("waiter %d: %v", i, err)
				granted <- -1
				return
			}
			grants[i] = g
			granted <- i
		})
		// Queue one after another, each with its watches set.
		deadline := time.Now().Add(10 * time.Second)
		for d.sess.watches.Load() < int64((i+1)*(i+2)/2) {
			if time.Now().After(deadline) {
				t.Fatalf("waiter %d did not set its watches", i)
			}
			time.Sleep(5 * time.Millisecond)
		}
	}
	time.Sleep(300 * time.Millisecond) // the last GetW requests are answered
	addr := c.g.Addrs()[0]
	prev := holder
	for i := range waiters {
		before := packetsReceived(t, addr)
		if err := prev.Lock.Release(ctx); err != nil {
			t.Fatal(err)
		}
		got := <-granted
		if got != i {
			t.Fatalf("release %d admitted waiter %d, want %d (arrival order)", i, got, i)
		}
		time.Sleep(100 * time.Millisecond)            // a herd would read now
		sent := packetsReceived(t, addr) - before - 1 // one mntr command
		t.Logf("release %d with %d waiting: %d requests", i, waiters-i-1, sent)
		if sent > 2+1 { // a ping may fall in
			t.Errorf("release %d with %d others waiting cost %d requests, want 2 (the delete, one read by the waiter admitted)", i, waiters-i-1, sent)
		}
		prev = grants[got]
	}
	_ = prev.Lock.Release(ctx)
	wg.Wait()
	if n := d.sess.watches.Load(); n != 0 {
		t.Errorf("%d watches left counted after every waiter was served", n)
	}
}

// TestSemaphoreCancelLeavesNothing: a waiter whose ctx ends deletes its
// node, so the queue behind it moves on.
func TestSemaphoreCancelLeavesNothing(t *testing.T) {
	c, ctx, d, _ := countedDriver(t)
	key := uniqueKey(t)
	holder := mustPermits(ctx, t, d, semReq(key, 1, 1))
	wctx, cancel := context.WithTimeout(ctx, 200*time.Millisecond)
	_, err := d.waitPermits(wctx, semReq(key, 1, 1))
	cancel()
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("a canceled wait: %v", err)
	}
	children, _, err := c.admin.Children(d.semParent(key))
	if err != nil {
		t.Fatal(err)
	}
	if len(children) != 1 {
		t.Fatalf("after a canceled wait the semaphore has nodes %v, want the holder's only", children)
	}
	_ = holder.Lock.Release(ctx)
}

// TestSemaphoreContainerApart: a semaphore's container is never a lock's,
// a read-write lock's or its fence node, whatever the two keys.
func TestSemaphoreContainerApart(t *testing.T) {
	d := &Driver{base: "/b"}
	keys := []string{"sem", "rw", "rwfence", "a.sem", "sem.a", "rw.sem", "x", "%", "."}
	for _, k1 := range keys {
		for _, k2 := range keys {
			for what, other := range map[string]string{
				"lock container": d.base + "/" + encodeKey(k2),
				"rw container":   d.rwParent(k2),
				"rw fence":       d.rwFence(k2),
			} {
				if d.semParent(k1) == other {
					t.Errorf("the semaphore %q and the %s of %q are both %s", k1, what, k2, other)
				}
			}
		}
	}
}
