package conformance

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/distlock/distlock"
)

// Read-write lock cases. A store without read-write locks (Locker.RWMutex
// reports ErrUnsupported) skips them with the reason.

// rwOf returns c's RWMutex for key, or skips the case.
func rwOf(t *testing.T, c *client, key string) *distlock.RWMutex {
	t.Helper()
	m, err := c.RWMutex(key)
	if errors.Is(err, distlock.ErrUnsupported) {
		t.Skipf("no read-write locks: %v", err)
	}
	if err != nil {
		t.Fatalf("RWMutex(%q): %v", key, err)
	}
	return m
}

func mustRLock(t *testing.T, m *distlock.RWMutex, opts ...distlock.Option) *distlock.Lease {
	t.Helper()
	le, err := m.RLock(ctxFor(t, 30*time.Second), opts...)
	if err != nil {
		t.Fatalf("RLock(%q): %v", m.Key(), err)
	}
	return le
}

func mustLock(t *testing.T, m *distlock.RWMutex, opts ...distlock.Option) *distlock.Lease {
	t.Helper()
	le, err := m.Lock(ctxFor(t, 30*time.Second), opts...)
	if err != nil {
		t.Fatalf("Lock(%q): %v", m.Key(), err)
	}
	return le
}

// tryRW makes one attempt (write or read) and reports whether it was
// granted, releasing at once what it got.
func tryRW(t *testing.T, m *distlock.RWMutex, write bool) bool {
	t.Helper()
	try := m.TryRLock
	if write {
		try = m.TryLock
	}
	le, err := try(ctxFor(t, 10*time.Second))
	if err != nil {
		if !isNotAcquired(err) {
			t.Fatalf("try (write=%v) on %q: unexpected error %v", write, m.Key(), err)
		}
		return false
	}
	release(t, le)
	return true
}

func testRWExclusion(t *testing.T, e *env) {
	const lockers, rounds = 3, 5
	key := e.key("rw")
	var readers, writers, bad atomic.Int32
	check := func(write bool) {
		if w, r := writers.Load(), readers.Load(); w > 1 || (w == 1 && r > 0) || (!write && w > 0) {
			bad.Add(1)
		}
	}
	var wg sync.WaitGroup
	for range lockers {
		m := rwOf(t, e.locker(t), key)
		for worker := range 3 {
			write := worker == 0
			wg.Go(func() {
				for range rounds {
					lock, count := m.RLock, &readers
					if write {
						lock, count = m.Lock, &writers
					}
					le, err := lock(ctxFor(t, 60*time.Second))
					if err != nil {
						t.Errorf("write=%v: %v", write, err)
						return
					}
					count.Add(1)
					check(write)
					work(2 * time.Millisecond)
					check(write)
					count.Add(-1)
					if err := le.Release(ctxFor(t, 10*time.Second)); err != nil {
						t.Errorf("Release (write=%v): %v", write, err)
						return
					}
				}
			})
		}
	}
	wg.Wait()
	if n := bad.Load(); n > 0 {
		t.Errorf("%d times a holder saw a writer together with a reader or another writer", n)
	}
}

func testRWReadersShare(t *testing.T, e *env) {
	key := e.key("share")
	a, b, c := rwOf(t, e.locker(t), key), rwOf(t, e.locker(t), key), rwOf(t, e.locker(t), key)
	ra := mustRLock(t, a)
	rb, err := b.TryRLock(ctxFor(t, 10*time.Second))
	if err != nil {
		t.Fatalf("a second reader was refused while only a reader held the lock: %v", err)
	}
	if tryRW(t, c, true) {
		t.Error("a writer was granted while two readers held the lock")
	}
	release(t, ra)
	if tryRW(t, c, true) {
		t.Error("a writer was granted while a reader held the lock")
	}
	release(t, rb)
	w, err := c.TryLock(ctxFor(t, 10*time.Second))
	if err != nil {
		t.Fatalf("TryLock after every reader released: %v", err)
	}
	if tryRW(t, a, false) {
		t.Error("a reader was granted while a writer held the lock")
	}
	if tryRW(t, b, true) {
		t.Error("a second writer was granted while a writer held the lock")
	}
	release(t, w)
}

func testRWWriterNotStarved(t *testing.T, e *env) {
	key := e.key("starve")
	a, w, c := rwOf(t, e.locker(t), key), rwOf(t, e.locker(t), key), rwOf(t, e.locker(t), key)
	first := mustRLock(t, a)
	got := make(chan *distlock.Lease, 1)
	wctx, wcancel := context.WithTimeout(context.Background(), 4*e.ttl+10*time.Second)
	defer wcancel()
	started := time.Now()
	go func() {
		le, err := w.Lock(wctx)
		if err != nil {
			t.Errorf("the waiting writer: %v", err)
		}
		got <- le
	}()
	if !eventually(e.ttl+3*time.Second, func() bool { return !tryRW(t, c, false) }) {
		t.Error("new readers were still granted while a writer waited")
	}
	// A stream of readers that, were they let in, would always leave one
	// holding: the writer must still get in once the first reader leaves.
	stop := make(chan struct{})
	var wg sync.WaitGroup
	var grants atomic.Int32
	var readers []*client
	for i := range 3 {
		rc := e.locker(t)
		readers = append(readers, rc)
		m := rwOf(t, rc, key)
		wg.Go(func() {
			work(time.Duration(i) * 15 * time.Millisecond) // staggered, so that their holds overlap
			for {
				select {
				case <-stop:
					return
				default:
				}
				ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
				le, err := m.RLock(ctx)
				cancel()
				if err != nil {
					continue
				}
				grants.Add(1)
				work(40 * time.Millisecond)
				_ = le.Release(ctxFor(t, 10*time.Second))
			}
		})
	}
	// The first reader leaves once every reader of the stream is trying.
	for _, rc := range readers {
		if !rc.probe.until(waitLimit, func(p *probe) bool { return p.began >= 1 }) {
			t.Fatal("a reader of the stream never began its RLock")
		}
	}
	release(t, first)
	le := <-got
	close(stop)
	wg.Wait()
	if le == nil {
		t.Fatalf("the writer was starved: no grant in %v while readers streamed (%d reader grants)", time.Since(started).Round(time.Millisecond), grants.Load())
	}
	t.Logf("writer granted after %v; %d reader grants meanwhile", time.Since(started).Round(time.Millisecond), grants.Load())
	release(t, le)
}

func testRWTokens(t *testing.T, e *env) {
	key := e.key("tokens")
	a, b, c := rwOf(t, e.locker(t), key), rwOf(t, e.locker(t), key), rwOf(t, e.locker(t), key)
	var last uint64
	write := func(le *distlock.Lease, how string) {
		t.Helper()
		if le.Token() <= last {
			t.Errorf("%s: write token %d, not greater than the previous %d", how, le.Token(), last)
		}
		last = le.Token()
	}
	read := func(le *distlock.Lease, how string) {
		t.Helper()
		if le.Token() != last {
			t.Errorf("%s: read token %d, want the last write's %d", how, le.Token(), last)
		}
	}
	w := mustLock(t, a)
	write(w, "first writer")
	release(t, w)
	r1, r2 := mustRLock(t, b), mustRLock(t, c)
	read(r1, "a reader")
	read(r2, "a second reader")
	release(t, r1)
	release(t, r2)
	w = mustLock(t, b)
	write(w, "a writer of another Locker")
	inner := mustRLock(t, b, distlock.WithOwner(w.Owner()))
	read(inner, "the writer's own read")
	release(t, inner)
	release(t, w)
	read(mustRLockReleased(t, a), "a reader after the second write")
	w, err := a.Lock(ctxFor(t, 30*time.Second), distlock.WithoutAutoRenew())
	if err != nil {
		t.Fatalf("Lock: %v", err)
	}
	write(w, "a writer without renewal")
	if !waitDone(w, 2*e.ttl+5*time.Second) {
		t.Fatal("a write lease without auto-renewal did not expire")
	}
	w = mustLock(t, c)
	write(w, "a writer after the previous one expired")
	release(t, w)
}

// mustRLockReleased takes the read side and releases it, returning the
// released lease (its Token stays readable).
func mustRLockReleased(t *testing.T, m *distlock.RWMutex) *distlock.Lease {
	t.Helper()
	le := mustRLock(t, m)
	release(t, le)
	return le
}

func testRWCrashedHolder(t *testing.T, e *env) {
	key := e.key("crash")
	b := rwOf(t, e.locker(t), key)
	for _, write := range []bool{true, false} {
		cc := e.locker(t)
		m := rwOf(t, cc, key)
		var le *distlock.Lease
		if write {
			le = mustLock(t, m)
		} else {
			le = mustRLock(t, m)
		}
		if err := e.h.Kill(ctxFor(t, 10*time.Second), cc.d); err != nil {
			t.Fatalf("harness Kill: %v", err)
		}
		bound := 4*e.ttl + 10*time.Second
		w, err := b.Lock(ctxFor(t, bound))
		if err != nil {
			t.Fatalf("a crashed holder's lock (write=%v) was not free within %v: %v", write, bound, err)
		}
		if !waitDone(le, 5*time.Second) {
			t.Errorf("the crashed holder's lease (write=%v) was still reported held after another writer got in", write)
		}
		release(t, w)
	}
}

func testRWWaitCancel(t *testing.T, e *env) {
	key := e.key("cancel")
	a, b, c := rwOf(t, e.locker(t), key), rwOf(t, e.locker(t), key), rwOf(t, e.locker(t), key)
	r := mustRLock(t, a)
	limit := e.ttl + time.Second
	ctx, cancel := context.WithTimeout(context.Background(), limit/2)
	start := time.Now()
	le, err := b.Lock(ctx)
	cancel()
	if err == nil {
		t.Fatal("Lock was granted while a reader held the lock")
	}
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("Lock that gave up: %v, want an error matching context.DeadlineExceeded", err)
	}
	if took := time.Since(start); took > limit+2*time.Second {
		t.Errorf("Lock took %v to give up after its ctx ended at %v", took, limit/2)
	}
	_ = le
	if !tryRW(t, c, false) {
		t.Error("a writer that gave up still kept new readers out")
	}
	release(t, r)

	w := mustLock(t, a)
	ctx, cancel = context.WithTimeout(context.Background(), limit/2)
	if _, err := b.RLock(ctx); err == nil {
		t.Error("RLock was granted while a writer held the lock")
	}
	cancel()
	release(t, w)
	if !tryRW(t, c, true) {
		t.Error("a reader that gave up left something that keeps writers out")
	}
}

func testRWUpgrade(t *testing.T, e *env) {
	key := e.key("upgrade")
	a, b, c := rwOf(t, e.locker(t), key), rwOf(t, e.locker(t), key), rwOf(t, e.locker(t), key)
	refused := func(le *distlock.Lease, err error, how string) {
		t.Helper()
		if err == nil {
			t.Errorf("%s: upgrade granted", how)
			release(t, le)
			return
		}
		if !errors.Is(err, distlock.ErrUpgrade) {
			t.Errorf("%s: %v, want an error matching ErrUpgrade", how, err)
		}
	}
	r := mustRLock(t, a)
	le, err := a.Lock(r.Context())
	refused(le, err, "the same Locker, with the read lease's ctx")
	if b.Locker().Capabilities().CrossProcessReentry {
		le, err = b.Lock(ctxFor(t, 2*e.ttl+2*time.Second), distlock.WithOwner(r.Owner()))
		refused(le, err, "another Locker with the reader's owner")
	}
	release(t, r)

	w := mustLock(t, a)
	inner, err := a.RLock(w.Context())
	if err != nil {
		t.Fatalf("the writer taking the read side: %v", err)
	}
	if inner.Token() != w.Token() {
		t.Errorf("the writer's read lease has token %d, want the write's %d", inner.Token(), w.Token())
	}
	release(t, w)
	if tryRW(t, c, false) {
		t.Error("another reader got in while the writer's own read lease was held")
	}
	release(t, inner)
	if !tryRW(t, c, true) {
		t.Error("the lock was not free after the writer released both leases")
	}
}
