package distlock_test

import (
	"context"
	"errors"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/distlock/distlock"
	"github.com/distlock/distlock/backend"
	"github.com/distlock/distlock/internal/shim"
	"github.com/distlock/distlock/memlock"
)

// narrowDriver is a store reached through a narrow pipe: its releases go
// through conns connections, each release holding one for delay. It
// counts the releases in flight at once, and those that finished.
type narrowDriver struct {
	shim.Notifier
	conns    chan struct{}
	delay    time.Duration
	down     atomic.Bool // releases get no answer until their ctx ends
	failKey  string      // a release of this key fails at once (ErrUnavailable)
	inFlight atomic.Int64
	peak     atomic.Int64
	released atomic.Int64
}

func newNarrow(t *testing.T, conns int, delay time.Duration) *narrowDriver {
	t.Helper()
	inner, err := memlock.NewStore().NewDriver(nil)
	if err != nil {
		t.Fatal(err)
	}
	return &narrowDriver{Notifier: shim.Notifier{Driver: inner}, conns: make(chan struct{}, conns), delay: delay}
}

func (d *narrowDriver) TryAcquire(ctx context.Context, req backend.Request) (backend.Grant, error) {
	return tryAcquireThen(ctx, d.Driver, req, func(g *backend.Grant) { g.Lock = &narrowLock{Lock: g.Lock, d: d, key: req.Key} })
}

type narrowLock struct {
	backend.Lock
	d   *narrowDriver
	key string
}

func (l *narrowLock) Release(ctx context.Context) error {
	d := l.d
	n := d.inFlight.Add(1)
	defer d.inFlight.Add(-1)
	for p := d.peak.Load(); n > p && !d.peak.CompareAndSwap(p, n); p = d.peak.Load() {
	}
	if l.key != "" && l.key == d.failKey {
		return backend.ErrUnavailable
	}
	if d.down.Load() {
		<-ctx.Done()
		return backend.ErrUnavailable
	}
	select {
	case d.conns <- struct{}{}:
	case <-ctx.Done():
		return backend.ErrUnavailable
	}
	time.Sleep(d.delay)
	<-d.conns
	if err := l.Lock.Release(ctx); err != nil {
		return err
	}
	d.released.Add(1)
	return nil
}

// holdMany has l take n keys.
func holdMany(t *testing.T, l *distlock.Locker, n int) {
	t.Helper()
	for i := range n {
		if _, err := l.TryAcquire(context.Background(), "close/"+strconv.Itoa(i), distlock.WithTTL(time.Minute)); err != nil {
			t.Fatal(err)
		}
	}
}

// TestCloseReleasesMoreThanOneTimeoutAllows: Close releases every lease
// while the store answers, even when releasing them all takes longer than
// the release timeout, and has a bounded number of releases in flight.
// (Close used to start one release per lease, all under one shared
// timeout: the releases queued past it were abandoned, and a Locker with
// 100,000 leases on Redis left thousands of them to expire.)
func TestCloseReleasesMoreThanOneTimeoutAllows(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const n = 1000
		d := newNarrow(t, 1, time.Millisecond) // >= 1 s to release them all
		l := distlock.New(d, distlock.WithReleaseTimeout(400*time.Millisecond))
		holdMany(t, l, n)
		if err := l.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
		if got := d.released.Load(); got != n {
			t.Errorf("Close released %d of %d leases, want all", got, n)
		}
		if p := d.peak.Load(); p > 64 {
			t.Errorf("%d releases in flight at once, want at most 64", p)
		}
	})
}

// TestCloseGivesUpOnUnreachableStore: with the store answering nothing,
// Close ends in about one release timeout however many leases it holds,
// leaving them to expire, and never has more than a bounded number of
// releases waiting.
func TestCloseGivesUpOnUnreachableStore(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const n = 1000
		const timeout = 200 * time.Millisecond
		d := newNarrow(t, 1, 0)
		l := distlock.New(d, distlock.WithReleaseTimeout(timeout))
		holdMany(t, l, n)
		d.down.Store(true)
		var wg sync.WaitGroup
		start := time.Now()
		wg.Go(func() {
			if err := l.Close(); err == nil {
				t.Error("Close of leases on an unreachable store returned nil")
			}
		})
		wg.Wait()
		if took := time.Since(start); took > 10*timeout {
			t.Errorf("Close took %v with the store unreachable, want about %v", took, timeout)
		}
		if p := d.peak.Load(); p > 64 {
			t.Errorf("%d releases in flight at once, want at most 64", p)
		}
		if got := d.released.Load(); got != 0 {
			t.Errorf("%d releases reported done by an unreachable store", got)
		}
	})
}

// TestCloseReportsFailureBesideGoneLock: Close reports a release that
// failed even when another lease's lock was found gone (which it need not
// report). It used to drop the whole joined error whenever any part of it
// matched ErrNotHeld, so among many leases one gone lock hid every failure.
func TestCloseReportsFailureBesideGoneLock(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		inner := memlock.NewStore()
		md, err := inner.NewDriver(nil)
		if err != nil {
			t.Fatal(err)
		}
		d := &narrowDriver{Notifier: shim.Notifier{Driver: md}, conns: make(chan struct{}, 1), failKey: "close/1"}
		l := distlock.New(d)
		holdMany(t, l, 2)
		inner.Delete("close/0") // its release answers ErrNotHeld
		err = l.Close()
		if err == nil || !errors.Is(err, backend.ErrUnavailable) {
			t.Errorf("Close = %v, want the failed release of close/1 reported", err)
		}
	})
}

// TestCloseReportsExpiryOfLeasesNotYetReleased: while Close is busy
// releasing other leases, a lease it has not reached yet is no longer
// renewed (the watchdog has stopped); once its validity runs out it must
// be reported lost (Err, Done), as it would be without Close: the store
// may have handed its lock to someone else by then. Close used to ignore
// the loss (Err stayed nil and Done open past the deadline) until its
// turn came, and then reported the lease released, while another Locker
// could already hold the lock.
func TestCloseReportsExpiryOfLeasesNotYetReleased(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const n = 66 // more than Close's 64 releases in flight
		const ttl = 200 * time.Millisecond
		store := memlock.NewStore()
		inner, err := store.NewDriver(nil)
		if err != nil {
			t.Fatal(err)
		}
		d := &narrowDriver{Notifier: shim.Notifier{Driver: inner}, conns: make(chan struct{}, 1)}
		l := distlock.New(d, distlock.WithReleaseTimeout(10*time.Second))
		ctx := context.Background()
		leases := make([]*distlock.Lease, n)
		for i := range leases {
			if leases[i], err = l.TryAcquire(ctx, "close/"+strconv.Itoa(i), distlock.WithTTL(ttl)); err != nil {
				t.Fatal(err)
			}
		}
		d.conns <- struct{}{} // every release Close sends waits until the test lets it through
		closed := make(chan error, 1)
		go func() { closed <- l.Close() }()
		// Wait (bounded) until Close has sent its first releases, then past
		// every lease's deadline.
		for i := 0; d.inFlight.Load() < 64 && i < 500; i++ {
			time.Sleep(5 * time.Millisecond)
		}
		var last time.Time
		for _, le := range leases {
			if dl := le.Deadline(); dl.After(last) {
				last = dl
			}
		}
		time.Sleep(time.Until(last) + 20*time.Millisecond)

		l2 := newLocker(t, store, "")
		for _, le := range leases {
			if le.Err() != nil {
				continue
			}
			t.Errorf("lease on %s: Err() = nil %v past its deadline while Close had not released it yet", le.Key(), time.Since(le.Deadline()).Round(time.Millisecond))
			if le2, err := l2.TryAcquire(ctx, le.Key()); err == nil {
				t.Errorf("and another Locker holds %s meanwhile", le.Key())
				_ = le2.Release(ctx)
			}
		}
		for _, le := range leases {
			select {
			case <-le.Done():
			case <-time.After(2 * time.Second):
				t.Errorf("lease on %s: Done still open %v past its deadline", le.Key(), time.Since(le.Deadline()).Round(time.Millisecond))
			}
		}
		<-d.conns // let the releases through
		if err := <-closed; err != nil {
			t.Logf("Close: %v", err)
		}
	})
}
