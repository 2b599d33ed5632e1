package sqllock_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/distlock/distlock"
	"github.com/distlock/distlock/backend"
	"github.com/distlock/distlock/conformance"
)

// faultHarness is what the refresh-doubt tests need of a dialect's harness.
type faultHarness interface {
	conformance.Harness
	conformance.Partitioner
}

// eachHarness runs f with a harness of each row that the refresh-doubt
// tests cover, over the shared servers, closed when f's test ends.
func eachHarness(t *testing.T, ttl time.Duration, f func(t *testing.T, h faultHarness)) {
	eachDialect(t, mysqlProc|allPG, func(t *testing.T, d *dialect) {
		h := newHarness(d, d.server(t), ttl)
		t.Cleanup(func() { _ = h.Close() })
		f(t, h)
	})
}

// newDrivers makes n Drivers of h, closed when the test ends.
func newDrivers(t *testing.T, h faultHarness, n int) []backend.Driver {
	t.Helper()
	ds := make([]backend.Driver, n)
	for i := range ds {
		d, err := h.NewDriver(ctxFor(t, 30*time.Second))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = d.Close() })
		ds[i] = d
	}
	return ds
}

// TestRefreshGivenUpIsDoubt: a Refresh whose ctx ends before the server
// answers (its path stalled) reports doubt, not loss, and leaves the lock
// held: the session is not closed under it, the next Refresh (after the
// stall) confirms it, and another client still cannot take the lock.
func TestRefreshGivenUpIsDoubt(t *testing.T) {
	eachHarness(t, time.Second, func(t *testing.T, h faultHarness) {
		ds := newDrivers(t, h, 2)
		d, other := ds[0], ds[1]
		key := uniqueKey("refresh-doubt")
		lost := make(chan error, 1)
		g, err := d.TryAcquire(ctxFor(t, 10*time.Second), backend.Request{Key: key, Owner: "owner-doubt-0123456789abc",
			TTL: 30 * time.Second, OnLost: func(err error) { lost <- err }})
		if err != nil {
			t.Fatal(err)
		}
		if err := h.Partition(ctxFor(t, 10*time.Second), d); err != nil {
			t.Fatal(err)
		}
		short, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
		err = g.Lock.Refresh(short, 30*time.Second)
		cancel()
		t.Logf("Refresh under a stalled path with a 300ms ctx: %v", err)
		switch {
		case err == nil:
			t.Error("Refresh over a black-holed path succeeded")
		case errors.Is(err, backend.ErrNotHeld):
			t.Errorf("Refresh given up by the client = %v, want doubt (ErrUnavailable), not ErrNotHeld", err)
		case !errors.Is(err, backend.ErrUnavailable) || !errors.Is(err, context.DeadlineExceeded):
			t.Errorf("Refresh given up by the client = %v, want ErrUnavailable wrapping the ctx's end", err)
		}
		// A second Refresh while the first statement is still out waits
		// for it (never two statements on the connection) and gives up
		// with its own ctx, still in doubt.
		short, cancel = context.WithTimeout(context.Background(), 100*time.Millisecond)
		err = g.Lock.Refresh(short, 30*time.Second)
		cancel()
		if err == nil || errors.Is(err, backend.ErrNotHeld) {
			t.Errorf("second Refresh while the first is in flight = %v, want doubt", err)
		}
		if err := h.Heal(ctxFor(t, 10*time.Second), d); err != nil {
			t.Fatal(err)
		}
		if err := g.Lock.Refresh(ctxFor(t, 20*time.Second), 30*time.Second); err != nil {
			t.Fatalf("Refresh after the stall: %v (the lock's session did not survive a refresh the client gave up on)", err)
		}
		select {
		case err := <-lost:
			t.Fatalf("OnLost: %v", err)
		default:
		}
		if g2, err := other.TryAcquire(ctxFor(t, 10*time.Second), backend.Request{Key: key, Owner: "owner-other-0123456789ab", TTL: 30 * time.Second}); !errors.Is(err, backend.ErrNotAcquired) {
			if err == nil {
				_ = g2.Lock.Release(ctxFor(t, 10*time.Second))
			}
			t.Fatalf("another client's TryAcquire after the stall = %v, want ErrNotAcquired", err)
		}
		if err := g.Lock.Release(ctxFor(t, 10*time.Second)); err != nil {
			t.Fatalf("Release: %v", err)
		}
	})
}

// hookDriver calls onRefresh before each Refresh of a lock it granted and
// done after it.
type hookDriver struct {
	backend.Driver
	onRefresh func(key string)
	done      func(key string, err error)
}

// Capabilities: only TryAcquire is wrapped, so waits poll.
func (d *hookDriver) Capabilities() backend.Capabilities {
	c := d.Driver.Capabilities()
	c.Wait, c.Semaphore, c.RW = backend.WaitPoll, "", ""
	return c
}

func (d *hookDriver) TryAcquire(ctx context.Context, req backend.Request) (backend.Grant, error) {
	g, err := d.Driver.TryAcquire(ctx, req)
	if err == nil {
		g.Lock = &hookLock{Lock: g.Lock, key: req.Key, d: d}
	}
	return g, err
}

type hookLock struct {
	backend.Lock
	key string
	d   *hookDriver
}

func (l *hookLock) Refresh(ctx context.Context, ttl time.Duration) error {
	l.d.onRefresh(l.key)
	err := l.Lock.Refresh(ctx, ttl)
	l.d.done(l.key, err)
	return err
}

// TestBatchStallKeepsLongLease: a 3 s lease and a 30 s lease renewed in
// one batch while the store's path stalls for 3.3 s. The short lease is
// lost at its deadline; the long one, whose refresh the client gave up on
// at the batch's end, stays in doubt and is held again after the stall,
// with some 25 s of validity left: its session was not closed.
func TestBatchStallKeepsLongLease(t *testing.T) {
	eachHarness(t, time.Second, func(t *testing.T, h faultHarness) {
		d := newDrivers(t, h, 1)[0]
		short, long := uniqueKey("batch-short"), uniqueKey("batch-long")
		var (
			mu       sync.Mutex
			stalled  bool
			stallErr error // the long lease's refresh during the stall
			renewed  = make(chan struct{})
			once     sync.Once
			healed   = make(chan struct{})
			inStall  = make(chan struct{})
			stallRes = make(chan struct{})
		)
		hd := &hookDriver{Driver: d}
		hd.onRefresh = func(key string) {
			mu.Lock()
			defer mu.Unlock()
			if key != long || stalled {
				return
			}
			// The long lease rides in the short one's batch: stall now,
			// for 3.3 s, with this refresh in flight.
			stalled = true
			if err := h.Partition(context.Background(), d); err != nil {
				t.Error(err)
			}
			close(inStall)
			time.AfterFunc(3300*time.Millisecond, func() {
				_ = h.Heal(context.Background(), d)
				close(healed)
			})
		}
		first := true
		hd.done = func(key string, err error) {
			if key != long {
				return
			}
			mu.Lock()
			defer mu.Unlock()
			if first {
				first = false
				stallErr = err
				close(stallRes)
				return
			}
			select {
			case <-healed:
				if err == nil {
					once.Do(func() { close(renewed) })
				}
			default:
			}
		}
		l := distlock.New(hd)
		t.Cleanup(func() { _ = l.Close() })
		ls, err := l.TryAcquire(ctxFor(t, 10*time.Second), short, distlock.WithTTL(3*time.Second))
		if err != nil {
			t.Fatal(err)
		}
		ll, err := l.TryAcquire(ctxFor(t, 10*time.Second), long, distlock.WithTTL(30*time.Second))
		if err != nil {
			t.Fatal(err)
		}
		select {
		case <-inStall:
		case <-time.After(20 * time.Second):
			t.Fatal("the long lease was not renewed within 20s")
		}
		t.Cleanup(func() { <-healed })
		stallStart := time.Now()
		select {
		case <-ls.Done():
			t.Logf("short lease ended %v into the stall: %v", time.Since(stallStart).Round(time.Millisecond), ls.Err())
		case <-time.After(10 * time.Second):
			t.Fatal("the short lease outlived a 3.3s stall by 10s")
		}
		select {
		case <-stallRes:
		case <-time.After(20 * time.Second):
			t.Fatal("the long lease's refresh did not return")
		}
		mu.Lock()
		err = stallErr
		mu.Unlock()
		t.Logf("the long lease's refresh during the stall: %v", err)
		if errors.Is(err, backend.ErrNotHeld) {
			t.Errorf("the long lease's refresh, given up at the batch's end, = %v: want doubt, not ErrNotHeld", err)
		}
		select {
		case <-renewed:
			t.Logf("long lease renewed %v after the stall began; %v of validity left", time.Since(stallStart).Round(time.Millisecond),
				time.Until(ll.Deadline()).Round(time.Millisecond))
		case <-ll.Done():
			t.Fatalf("the 30s lease was lost %v into a 3.3s stall, %v before its deadline: %v", time.Since(stallStart).Round(time.Millisecond),
				time.Until(ll.Deadline()).Round(time.Millisecond), ll.Err())
		case <-time.After(20 * time.Second):
			t.Fatal("the long lease was not renewed within 20s of the stall")
		}
		if err := ll.Err(); err != nil {
			t.Fatalf("long lease after the stall: %v", err)
		}
		if err := ll.Release(ctxFor(t, 10*time.Second)); err != nil {
			t.Fatalf("Release: %v", err)
		}
	})
}

// TestReleaseDuringGivenUpRefresh: a Release that cannot wait for a
// refresh still out on the lock's connection (the caller gave up on it)
// does not leave the lock pinned: the statement is canceled, the
// connection closed, and another client gets the lock once the server
// sees it, long before the lock's 30 s idle timeout.
func TestReleaseDuringGivenUpRefresh(t *testing.T) {
	eachHarness(t, time.Second, func(t *testing.T, h faultHarness) {
		ds := newDrivers(t, h, 2)
		d, other := ds[0], ds[1]
		key := uniqueKey("release-doubt")
		g, err := d.TryAcquire(ctxFor(t, 10*time.Second), backend.Request{Key: key, Owner: "owner-rel-0123456789abcde", TTL: 30 * time.Second})
		if err != nil {
			t.Fatal(err)
		}
		if err := h.Partition(ctxFor(t, 10*time.Second), d); err != nil {
			t.Fatal(err)
		}
		short, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
		err = g.Lock.Refresh(short, 30*time.Second)
		cancel()
		if errors.Is(err, backend.ErrNotHeld) || !errors.Is(err, backend.ErrUnavailable) {
			t.Fatalf("Refresh given up by the client = %v, want doubt", err)
		}
		short, cancel = context.WithTimeout(context.Background(), 200*time.Millisecond)
		err = g.Lock.Release(short)
		cancel()
		t.Logf("Release while the refresh is out: %v", err)
		if !errors.Is(err, backend.ErrUnavailable) {
			t.Errorf("Release while a refresh is out = %v, want ErrUnavailable", err)
		}
		if err := h.Heal(ctxFor(t, 10*time.Second), d); err != nil {
			t.Fatal(err)
		}
		start := time.Now()
		g2, err := other.(backend.Waiter).Wait(ctxFor(t, 20*time.Second), backend.Request{Key: key, Owner: "owner-next-0123456789abc", TTL: 30 * time.Second})
		if err != nil {
			t.Fatalf("another client's Wait after the release: %v (the lock stayed pinned)", err)
		}
		t.Logf("freed for another client %v after the heal", time.Since(start).Round(time.Millisecond))
		_ = g2.Lock.Release(ctxFor(t, 10*time.Second))
	})
}
