//go:build linux

package etcdlock

import (
	"context"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/distlock/distlock/backend"
	"github.com/distlock/distlock/sandbox"
)

// TestReleaseEventFanout: a release's deletion is sent to the watches of
// the holder's own key and of the near waiters just behind it, not to
// every driver waiting for the lock, nor to drivers that followed that key
// in an earlier order of the queue. Eight drivers queue one after the
// other on one lock and take it in turn, three rounds in one order and
// three in another; etcd's own count of the watch events it sent
// (etcd_debugging_mvcc_events_total) must stay at most near+1 per release
// in the last round.
// A watch of the lock's whole range in every driver sends each release to
// all of them (7 per release here).
func TestReleaseEventFanout(t *testing.T) {
	g := sandbox.StartT(t, sandbox.Spec{Kind: sandbox.Etcd})
	addr := g.Addrs()[0]
	const n = 8
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	ds := ownDrivers(t, []string{addr}, n, "fanout")
	req := backend.Request{Key: "k", Owner: "o", TTL: 10 * time.Second}
	queued := func() int64 {
		t.Helper()
		resp, err := ds[0].c.Get(ctx, lockRange(ds[0].prefix, "k"), clientv3.WithPrefix(), clientv3.WithCountOnly())
		if err != nil {
			t.Fatal(err)
		}
		return resp.Count
	}
	type result struct {
		g   backend.Grant
		err error
	}
	// round queues the drivers in the given order, one after the other,
	// and lets each take the lock and release it in turn.
	round := func(order []int) {
		t.Helper()
		first, err := ds[order[0]].Wait(ctx, req)
		if err != nil {
			t.Fatal(err)
		}
		results := make([]chan result, n)
		for i := 1; i < n; i++ {
			results[i] = make(chan result, 1)
			d := ds[order[i]]
			go func() {
				g, err := d.Wait(ctx, req)
				results[i] <- result{g, err}
			}()
			// The next driver queues only once this one's key is in.
			for tries := 0; queued() < int64(i+1); tries++ {
				if tries == 500 {
					t.Fatalf("waiter %d not queued after 5 s", i)
				}
				time.Sleep(10 * time.Millisecond)
			}
		}
		if err := first.Lock.Release(ctx); err != nil {
			t.Fatal(err)
		}
		for i := 1; i < n; i++ {
			var r result
			select {
			case r = <-results[i]:
			case <-ctx.Done():
				t.Fatalf("waiter %d not granted: %v", i, ctx.Err())
			}
			if r.err != nil {
				t.Fatalf("waiter %d: %v", i, r.err)
			}
			if err := r.g.Lock.Release(ctx); err != nil {
				t.Fatal(err)
			}
		}
	}
	const metric = "etcd_debugging_mvcc_events_total"
	if _, ok := metrics(t, addr)[metric]; !ok {
		t.Skipf("etcd does not report %s", metric)
	}
	// The queue's order changes after three rounds (each driver i then
	// waits behind i-3 instead of i-1): the watches of keys a driver
	// followed in the first order must not keep receiving their releases.
	// Counted: the last round, once the new order has settled.
	order := func(step int) []int {
		o := make([]int, n)
		for i := range o {
			o[i] = (i * step) % n
		}
		return o
	}
	for range 3 {
		round(order(1))
	}
	for range 2 {
		round(order(3))
	}
	before := metrics(t, addr)[metric]
	round(order(3))
	// The last release's events may still be on their way out of etcd.
	time.Sleep(200 * time.Millisecond)
	sent := metrics(t, addr)[metric] - before
	perRelease := sent / n
	t.Logf("%g watch events for %d releases (%.2f per release)", sent, n, perRelease)
	if limit := float64(ds[0].near + 1); perRelease > limit {
		t.Errorf("%.2f watch events per release, want at most %g (the holder and the %d waiters just behind it)", perRelease, limit, ds[0].near)
	}
}
