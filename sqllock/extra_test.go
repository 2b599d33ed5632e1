package sqllock_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/distlock/distlock"
	"github.com/distlock/distlock/backend"
	"github.com/distlock/distlock/sqllock"
)

// TestFirstTimeLockers: lockers that meet on a brand-new name (no row yet),
// blocking and non-blocking at once, never see a deadlock or any error but
// ErrNotAcquired, and exactly one holds at a time.
func TestFirstTimeLockers(t *testing.T) {
	eachDialect(t, allRows, func(t *testing.T, d *dialect) {
		s := d.server(t)
		const lockers, perLocker, names = 3, 3, 15
		ls := make([]*distlock.Locker, lockers)
		for i := range ls {
			ls[i], _ = d.newLocker(t, s, 5*time.Second, sqllock.Options{})
		}
		for n := range names {
			key := uniqueKey("first")
			var (
				wg      sync.WaitGroup
				mu      sync.Mutex
				inside  int
				overlap bool
			)
			start := make(chan struct{})
			for i, l := range ls {
				for j := range perLocker {
					wg.Go(func() {
						<-start
						var le *distlock.Lease
						var err error
						if (i+j+n)%2 == 0 {
							le, err = l.Acquire(ctxFor(t, 30*time.Second), key)
						} else {
							le, err = l.TryAcquire(ctxFor(t, 30*time.Second), key)
						}
						if errors.Is(err, distlock.ErrNotAcquired) {
							return
						}
						if err != nil {
							if d.deadlock(err) {
								t.Errorf("a deadlock reached the user: %v", err)
							} else {
								t.Errorf("first-time locker: %v", err)
							}
							return
						}
						mu.Lock()
						inside++
						overlap = overlap || inside > 1
						mu.Unlock()
						time.Sleep(time.Millisecond)
						mu.Lock()
						inside--
						mu.Unlock()
						release(t, le)
					})
				}
			}
			close(start)
			wg.Wait()
			if overlap {
				t.Fatalf("name %d: two holders at once", n)
			}
		}
	})
}

// TestLockWaitTimeout: a server-side lock wait that times out (MySQL's
// innodb_lock_wait_timeout, error 1205; PostgreSQL's lock_timeout, 55P03)
// is retried within the caller's ctx, so a waiter outlasts it; the
// caller's own deadline is what ends a wait. The pool keeps only clean
// connections.
func TestLockWaitTimeout(t *testing.T) {
	eachDialect(t, allRows, func(t *testing.T, d *dialect) {
		s := d.server(t)
		waiter, c := d.newLocker(t, s, 5*time.Second, sqllock.Options{LockWaitTimeout: time.Second})
		holder, _ := d.newLocker(t, s, 5*time.Second, sqllock.Options{})
		key := uniqueKey("lwt")

		le := mustAcquire(t, holder, key)
		hold := d.lockWait.hold // above the server's timeout: at least one retry
		time.AfterFunc(hold, func() { release(t, le) })
		t0 := time.Now()
		lw, err := waiter.Acquire(ctxFor(t, 20*time.Second), key)
		if err != nil {
			t.Fatalf("a wait longer than the server's lock-wait timeout failed: %v", err)
		}
		took := time.Since(t0)
		t.Logf("waited %v across server lock-wait timeouts of 1s", took)
		if took < hold-100*time.Millisecond {
			t.Errorf("granted after %v while the holder held it for %v", took, hold)
		}
		release(t, lw)

		le = mustAcquire(t, holder, key)
		defer release(t, le)
		ctx, cancel := context.WithTimeout(context.Background(), d.lockWait.deadline)
		defer cancel()
		if _, err = waiter.Acquire(ctx, key); !errors.Is(err, context.DeadlineExceeded) {
			t.Errorf("a wait past the caller's deadline returned %v, want context.DeadlineExceeded", err)
		}
		if err := waiter.Close(); err != nil { // its spares go back to the pool
			t.Fatal(err)
		}
		d.checkPool(t, c)
	})
}

// TestInspect reports the holder and its token while held, and the last
// token once free.
func TestInspect(t *testing.T) {
	eachDialect(t, allRows, func(t *testing.T, d *dialect) {
		s := d.server(t)
		dr, _ := d.newDriver(t, s, sqllock.Options{})
		l := distlock.New(dr, distlock.WithDefaultTTL(5*time.Second))
		t.Cleanup(func() { _ = l.Close() })
		key := uniqueKey("inspect")
		info, err := dr.Inspect(ctxFor(t, 10*time.Second), key, backend.Exclusive)
		if err != nil || info.Held || info.Token != 0 {
			t.Fatalf("never-locked key: %+v, %v", info, err)
		}
		le := mustAcquire(t, l, key)
		other, _ := d.newDriver(t, s, sqllock.Options{})
		info, err = other.Inspect(ctxFor(t, 10*time.Second), key, backend.Exclusive)
		if err != nil || !info.Held || info.Owner != le.Owner() || info.Token != le.Token() {
			t.Errorf("held key: %+v, %v; want held by %s with token %d", info, err, le.Owner(), le.Token())
		}
		release(t, le)
		info, err = other.Inspect(ctxFor(t, 10*time.Second), key, backend.Exclusive)
		if err != nil || info.Held || info.Token != le.Token() {
			t.Errorf("released key: %+v, %v", info, err)
		}
	})
}

// TestDriverErrors: the driver's error kinds for a stale lock.
func TestDriverErrors(t *testing.T) {
	eachDialect(t, mysqlProc|pgRow|pgAdvisory, testDriverErrors)
}

func testDriverErrors(t *testing.T, dia *dialect) {
	s := dia.server(t)
	d, _ := dia.newDriver(t, s, sqllock.Options{})
	key := uniqueKey("errors")
	g, err := d.TryAcquire(ctxFor(t, 10*time.Second), backend.Request{Key: key, Owner: "owner-0123456789abcdef", TTL: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	d2, _ := dia.newDriver(t, s, sqllock.Options{})
	_, err = d2.TryAcquire(ctxFor(t, 10*time.Second), backend.Request{Key: key, Owner: "owner-other-0123456789ab", TTL: 5 * time.Second})
	if !errors.Is(err, backend.ErrNotAcquired) {
		t.Errorf("TryAcquire of a held key = %v, want ErrNotAcquired", err)
	}
	if err := dia.killHolder(ctxFor(t, 10*time.Second), s, key); err != nil {
		t.Fatal(err)
	}
	if err := g.Lock.Refresh(ctxFor(t, 10*time.Second), 5*time.Second); !errors.Is(err, backend.ErrNotHeld) {
		t.Errorf("Refresh after the session was killed = %v, want ErrNotHeld", err)
	}
	if err := g.Lock.Release(ctxFor(t, 10*time.Second)); !errors.Is(err, backend.ErrNotHeld) {
		t.Errorf("Release after the loss = %v, want ErrNotHeld", err)
	}
	if err := d.Close(); err != nil {
		t.Errorf("Close: %v", err)
	}
	if _, err := d.TryAcquire(ctxFor(t, 10*time.Second), backend.Request{Key: key, Owner: "o-0123456789abcdef", TTL: time.Second}); !errors.Is(err, backend.ErrClosed) {
		t.Errorf("TryAcquire after Close = %v, want ErrClosed", err)
	}
}

func mustAcquire(t *testing.T, l *distlock.Locker, key string) *distlock.Lease {
	t.Helper()
	le, err := l.Acquire(ctxFor(t, 30*time.Second), key)
	if err != nil {
		t.Fatalf("Acquire(%q): %v", key, err)
	}
	return le
}
