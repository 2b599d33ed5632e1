package zklock

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/distlock/distlock/backend"
)

// TestInspectQueues: the inspectors report the nodes that hold as holders
// and the queued ones as waiters (a semaphore's waiter for 1 permit
// queued behind one for 2 waits too; a reader queued behind a writer
// waits), with the holders' tokens, and read it in 1 request for the
// children plus 1 per holder (and the fence node for readers), pipelined.
// internal/insptest (TestInspectors) checks the rest.
func TestInspectQueues(t *testing.T) {
	c, ctx, d, _ := countedDriver(t)
	addr := c.g.Addrs()[0]
	var wg sync.WaitGroup
	wctx, stop := context.WithCancel(ctx)
	defer func() { stop(); wg.Wait() }()
	// queued waits until parent has n children.
	queued := func(parent string, n int) {
		t.Helper()
		if !eventually(10*time.Second, func() bool {
			ch, _, err := c.admin.Children(parent)
			return err == nil && len(ch) == n
		}) {
			t.Fatalf("%s did not reach %d children", parent, n)
		}
	}
	// requests runs f and returns how many requests the server received
	// meanwhile (less packetsReceived's own mntr).
	requests := func(f func()) int {
		before := packetsReceived(t, addr)
		f()
		return packetsReceived(t, addr) - before - 1
	}

	t.Run("Semaphore", func(t *testing.T) {
		key := uniqueKey(t)
		sr := semReq(key, 2, 3)
		held, err := d.tryPermits(ctx, sr)
		if err != nil {
			t.Fatal(err)
		}
		defer func() { _ = held.Lock.Release(ctx) }()
		for _, p := range []int{2, 1} {
			wg.Go(func() {
				if g, err := d.waitPermits(wctx, semReq(key, p, 3)); err == nil {
					_ = g.Lock.Release(ctx)
				}
			})
			queued(d.semParent(key), 4-p)
		}
		// The waiters watch the 1, then 2 nodes ahead: let their GetW
		// requests pass before counting.
		if !eventually(10*time.Second, func() bool { return d.sess.watches.Load() == 3 }) {
			t.Fatalf("the waiters set %d watches, want 3", d.sess.watches.Load())
		}
		time.Sleep(200 * time.Millisecond)
		var info backend.Info
		n := requests(func() { info, err = d.inspectPermits(ctx, key) })
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("%+v in %d requests", info, n)
		if info.Permits != 2 || !info.Held || len(info.Holders) != 1 || info.Waiters != 2 {
			t.Fatalf("InspectSemaphore = %+v, want 2 permits held by one grant, 2 waiters", info)
		}
		if h := info.Holders[0]; h.Owner != sr.Owner || h.Permits != 2 || h.Token != held.Token {
			t.Errorf("holder %+v, want owner %q, 2 permits, token %d", h, sr.Owner, held.Token)
		}
		if n < 2 || n > 3 { // a ping may fall in
			t.Errorf("InspectSemaphore sent %d requests, want 2 (children, the holder's node)", n)
		}
	})

	t.Run("RW", func(t *testing.T) {
		key := uniqueKey(t)
		req := func(owner string) backend.Request {
			return backend.Request{Key: key, Owner: owner, TTL: 10 * time.Second}
		}
		w, err := d.tryRW(ctx, req("w1"), backend.Write, false)
		if err != nil {
			t.Fatal(err)
		}
		readers := make(chan backend.Grant, 2)
		for i, owner := range []string{"r1", "r2"} {
			wg.Go(func() {
				if g, err := d.waitRW(wctx, req(owner), backend.Read); err == nil {
					readers <- g
				}
			})
			queued(d.rwParent(key), 2+i)
		}
		wg.Go(func() {
			if g, err := d.waitRW(wctx, req("w2"), backend.Write); err == nil {
				_ = g.Lock.Release(ctx)
			}
		})
		queued(d.rwParent(key), 4)
		info, err := d.inspectRW(ctx, key)
		if err != nil {
			t.Fatal(err)
		}
		if info.Owner != "w1" || info.Token != w.Token || len(info.Holders) != 0 || info.Waiters != 3 {
			t.Fatalf("InspectRW = %+v, want writer w1 with token %d, 3 waiters", info, w.Token)
		}
		if err := w.Lock.Release(ctx); err != nil {
			t.Fatal(err)
		}
		for range 2 {
			select {
			case g := <-readers:
				defer func() { _ = g.Lock.Release(ctx) }()
			case <-time.After(10 * time.Second):
				t.Fatal("the readers were not granted after the writer's release")
			}
		}
		n := requests(func() { info, err = d.inspectRW(ctx, key) })
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("%+v in %d requests", info, n)
		if info.Owner != "" || len(info.Holders) != 2 || info.Waiters != 1 ||
			info.Holders[0].Owner != "r1" || info.Holders[1].Owner != "r2" ||
			info.Holders[0].Token != w.Token || info.Holders[1].Token != w.Token {
			t.Fatalf("InspectRW = %+v, want readers r1, r2 with the last write's token %d, 1 waiter", info, w.Token)
		}
		if n < 4 || n > 5 { // a ping may fall in
			t.Errorf("InspectRW sent %d requests, want 4 (children, 2 readers' nodes, the fence node)", n)
		}
	})
}
