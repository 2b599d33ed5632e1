package distlock_test

import (
	"context"
	"errors"
	"runtime"
	"strings"
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

func durationUntil(t time.Time) time.Duration { return time.Until(t) }

func newLocker(t *testing.T, s *memlock.Store, wait backend.WaitKind, opts ...distlock.LockerOption) *distlock.Locker {
	t.Helper()
	d, err := s.NewDriver(&memlock.Options{Wait: wait})
	if err != nil {
		t.Fatal(err)
	}
	l := distlock.New(d, opts...)
	t.Cleanup(func() { l.Close() })
	return l
}

// capsDriver is memlock's driver with its Capabilities changed by edit.
type capsDriver struct {
	*memlock.Driver
	edit func(*backend.Capabilities)
}

func (d capsDriver) Capabilities() backend.Capabilities {
	c := d.Driver.Capabilities()
	d.edit(&c)
	return c
}

// tryAcquireThen is inner's TryAcquire of req, with granted applied to the
// grant when there is one: the TryAcquire of the tests' wrapping drivers,
// which wrap the grant's Lock.
func tryAcquireThen(ctx context.Context, inner backend.Driver, req backend.Request, granted func(*backend.Grant)) (backend.Grant, error) {
	g, err := inner.TryAcquire(ctx, req)
	if err == nil {
		granted(&g)
	}
	return g, err
}

func TestAcquireArgumentErrors(t *testing.T) {
	ctx := context.Background()
	l := newLocker(t, memlock.NewStore(), "")
	for _, tc := range []struct {
		key  string
		opts []distlock.Option
		is   error
		want string
	}{
		{"", nil, distlock.ErrInvalidKey, "key is empty"},
		{"a\x00b", nil, distlock.ErrInvalidKey, "control character U+0000 at byte 1"},
		{"\xff", nil, distlock.ErrInvalidKey, "not valid UTF-8"},
		{strings.Repeat("k", 2000), nil, distlock.ErrInvalidKey, "2000 bytes long, the limit is 1024"},
		{"k", []distlock.Option{distlock.WithTTL(-time.Second)}, distlock.ErrInvalidConfig, "TTL -1s is negative"},
		{"k", []distlock.Option{distlock.WithTTL(time.Microsecond)}, distlock.ErrInvalidConfig, "below the mem backend's minimum"},
		{"k", []distlock.Option{distlock.WithTTL(3 * time.Millisecond)}, distlock.ErrInvalidConfig, "clock-drift margin"},
		{"k", []distlock.Option{distlock.WithOwner("")}, distlock.ErrInvalidConfig, "owner id must be 1 to 128 bytes"},
		{"k", []distlock.Option{distlock.WithOwner("has space")}, distlock.ErrInvalidConfig, "printable ASCII"},
	} {
		_, err := l.TryAcquire(ctx, tc.key, tc.opts...)
		if !errors.Is(err, tc.is) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("TryAcquire(%.20q) = %v, want %v mentioning %q", tc.key, err, tc.is, tc.want)
		}
	}
}

func TestNewRejectsBadOptions(t *testing.T) {
	d, _ := memlock.NewStore().NewDriver(nil)
	defer d.Close()
	defer func() {
		if r := recover(); r == nil || !strings.Contains(r.(error).Error(), "clock drift factor") {
			t.Errorf("New with a drift factor of 0.9: recovered %v, want a panic naming the option", r)
		}
	}()
	distlock.New(d, distlock.WithClockDrift(0.9, 0))
}

// Concurrent acquisitions by one owner in one Locker must not queue behind
// each other in the store: they share one hold.
func TestConcurrentReentryBySameOwner(t *testing.T) {
	ctx := context.Background()
	l := newLocker(t, memlock.NewStore(), backend.WaitQueue)
	const n = 20
	leases := make([]*distlock.Lease, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			var err error
			cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
			defer cancel()
			leases[i], err = l.Acquire(cctx, "k", distlock.WithOwner("same-owner"))
			if err != nil {
				t.Errorf("Acquire %d: %v", i, err)
			}
		})
	}
	wg.Wait()
	for _, le := range leases {
		if le == nil || le.Token() != leases[0].Token() {
			t.Fatal("re-entries by one owner got different holds")
		}
	}
	for _, le := range leases {
		if err := le.Release(ctx); err != nil {
			t.Fatal(err)
		}
	}
}

func TestInDoubtThenRecovered(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		s := memlock.NewStore()
		l := newLocker(t, s, "")
		le, err := l.Acquire(ctx, "k", distlock.WithTTL(900*time.Millisecond))
		if err != nil {
			t.Fatal(err)
		}
		s.SetAvailable(false)
		deadline := time.Now().Add(2 * time.Second)
		for le.State() != distlock.StateInDoubt && time.Now().Before(deadline) {
			time.Sleep(5 * time.Millisecond)
		}
		if st := le.State(); st != distlock.StateInDoubt {
			t.Fatalf("with the store down, State() = %v, want in doubt (err %v)", st, le.Err())
		}
		s.SetAvailable(true)
		for le.State() != distlock.StateHeld && time.Now().Before(deadline) {
			time.Sleep(5 * time.Millisecond)
		}
		if st := le.State(); st != distlock.StateHeld {
			t.Fatalf("after the store came back, State() = %v, want held (err %v)", st, le.Err())
		}
		if err := le.Release(ctx); err != nil {
			t.Fatal(err)
		}
	})
}

func TestDriverReportedLoss(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		d := &lossDriver{}
		d.Driver, _ = memlock.NewStore().NewDriver(nil)
		l := distlock.New(d)
		defer l.Close()
		le, err := l.Acquire(ctx, "k")
		if err != nil {
			t.Fatal(err)
		}
		cause := errors.New("session expired")
		d.onLost.Load().(func(error))(cause)
		select {
		case <-le.Done():
		case <-time.After(5 * time.Second):
			t.Fatal("a loss the driver reported did not end the lease")
		}
		if !errors.Is(le.Err(), distlock.ErrLost) || !errors.Is(le.Err(), cause) {
			t.Errorf("Err() = %v, want ErrLost wrapping the driver's cause", le.Err())
		}
	})
}

type lossDriver struct {
	shim.Notifier
	onLost atomic.Value
}

func (d *lossDriver) TryAcquire(ctx context.Context, req backend.Request) (backend.Grant, error) {
	d.onLost.Store(req.OnLost)
	return d.Driver.TryAcquire(ctx, req)
}

// A Locker with many leases renews them in batches from one goroutine.
func TestRenewalsAreBatched(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		inner, _ := memlock.NewStore().NewDriver(nil)
		d := &batchDriver{Notifier: shim.Notifier{Driver: inner}}
		l := distlock.New(d)
		defer l.Close()
		before := runtime.NumGoroutine()
		const n = 1000
		leases := make([]*distlock.Lease, n)
		for i := range n {
			var err error
			if leases[i], err = l.Acquire(ctx, "k"+strings.Repeat("x", i%7)+string(rune('a'+i%26))+time.Duration(i).String(), distlock.WithTTL(1500*time.Millisecond)); err != nil {
				t.Fatal(err)
			}
		}
		if g := runtime.NumGoroutine() - before; g > 5 {
			t.Errorf("%d goroutines for %d leases, want a handful", g, n)
		}
		// Every lease is due for renewal TTL/3 (500 ms) after its grant; the
		// TTL is long enough that a slow machine acquiring the 1000 leases
		// (with -race, under load) loses none before its first renewal.
		time.Sleep(800 * time.Millisecond)
		calls, locks := d.calls.Load(), d.locks.Load()
		if locks < n || calls > locks/20 {
			t.Errorf("%d batch calls renewed %d leases; want every lease renewed, in few calls", calls, locks)
		}
		for _, le := range leases {
			if le.Err() != nil {
				t.Fatalf("lease lost: %v", le.Err())
			}
			if err := le.Release(ctx); err != nil {
				t.Fatal(err)
			}
		}
	})
}

type batchDriver struct {
	shim.Notifier
	calls, locks atomic.Int64
}

// Capabilities declares BatchRefresh (and no multi-lock step).
func (d *batchDriver) Capabilities() backend.Capabilities {
	c := d.Driver.Capabilities()
	c.BatchRefresh, c.MultiAtomic = true, false
	return c
}

func (d *batchDriver) TryAcquireMulti(context.Context, []backend.Request) ([]backend.Grant, error) {
	return nil, backend.ErrUnsupported
}

func (d *batchDriver) RefreshAll(ctx context.Context, locks []backend.Lock, ttls []time.Duration) []error {
	d.calls.Add(1)
	d.locks.Add(int64(len(locks)))
	errs := make([]error, len(locks))
	for i, lk := range locks {
		errs[i] = lk.Refresh(ctx, ttls[i])
	}
	return errs
}

func TestDoReturnsFnErrorAndReleases(t *testing.T) {
	ctx := context.Background()
	s := memlock.NewStore()
	l := newLocker(t, s, "")
	boom := errors.New("boom")
	err := l.Do(ctx, "k", func(context.Context) error { return boom })
	if !errors.Is(err, boom) {
		t.Errorf("Do = %v, want fn's error", err)
	}
	if s.Len() != 0 {
		t.Error("Do did not release the lock after fn failed")
	}
}

func TestCanceledAcquireLeavesNothing(t *testing.T) {
	for _, wait := range []backend.WaitKind{backend.WaitNotify, backend.WaitQueue, backend.WaitPoll} {
		t.Run(string(wait), func(t *testing.T) {
			ctx := context.Background()
			s := memlock.NewStore()
			a, b := newLocker(t, s, wait), newLocker(t, s, wait)
			le, err := a.Acquire(ctx, "k")
			if err != nil {
				t.Fatal(err)
			}
			cctx, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
			defer cancel()
			if _, err := b.Acquire(cctx, "k"); !errors.Is(err, context.DeadlineExceeded) {
				t.Fatalf("Acquire = %v, want DeadlineExceeded", err)
			}
			if err := le.Release(ctx); err != nil {
				t.Fatal(err)
			}
			if keys := s.Keys(); len(keys) != 0 {
				t.Errorf("state left in the store after a canceled wait: %q", keys)
			}
		})
	}
}

func TestMaxTTL(t *testing.T) {
	inner, _ := memlock.NewStore().NewDriver(nil)
	l := distlock.New(capsDriver{inner, func(c *backend.Capabilities) { c.MaxTTL = time.Hour }})
	defer l.Close()
	_, err := l.TryAcquire(context.Background(), "k", distlock.WithTTL(2*time.Hour))
	if !errors.Is(err, distlock.ErrInvalidConfig) || !strings.Contains(err.Error(), "above the mem backend's maximum of 1h0m0s") {
		t.Errorf("TryAcquire with a TTL above MaxTTL = %v", err)
	}
}

// A PerLockTTL store that applies a shorter first life (Grant.TTL < the
// requested TTL): validity counts that life, the first renewal comes within
// it, and renewals ask for the requested TTL, so the lease then lives its
// full TTL.
func TestShortFirstLife(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		inner, _ := memlock.NewStore().NewDriver(nil)
		d := &shortLifeDriver{Notifier: shim.Notifier{Driver: inner}, life: 600 * time.Millisecond}
		l := distlock.New(d)
		defer l.Close()
		const ttl = 5 * time.Second
		start := time.Now()
		le, err := l.Acquire(ctx, "k", distlock.WithTTL(ttl))
		if err != nil {
			t.Fatal(err)
		}
		defer le.Release(ctx)
		if dl := le.Deadline(); dl.After(start.Add(d.life)) || dl.Before(start.Add(d.life/2)) {
			t.Fatalf("deadline %v after acquire, want within the first life %v", dl.Sub(start), d.life)
		}
		// The first renewal is due after a third of the first life.
		for deadline := time.Now().Add(3 * time.Second); d.renewals.Load() == 0; {
			if time.Now().After(deadline) {
				t.Fatal("no renewal within the short first life")
			}
			time.Sleep(10 * time.Millisecond)
		}
		if got := time.Duration(d.asked.Load()); got != ttl {
			t.Errorf("renewal asked for %v, want the requested TTL %v", got, ttl)
		}
		time.Sleep(50 * time.Millisecond)
		if dl := le.Deadline(); time.Until(dl) < ttl/2 {
			t.Errorf("after a renewal the lease is valid for %v more, want about %v", time.Until(dl), ttl)
		}
		if le.Err() != nil {
			t.Fatal(le.Err())
		}
	})
}

type shortLifeDriver struct {
	shim.Notifier
	life     time.Duration
	renewals atomic.Int64
	asked    atomic.Int64
}

func (d *shortLifeDriver) TryAcquire(ctx context.Context, req backend.Request) (backend.Grant, error) {
	return tryAcquireThen(ctx, d.Driver, req, func(g *backend.Grant) {
		g.TTL = d.life
		g.Lock = &countingLock{Lock: g.Lock, d: d}
	})
}

type countingLock struct {
	backend.Lock
	d *shortLifeDriver
}

func (c *countingLock) Refresh(ctx context.Context, ttl time.Duration) error {
	c.d.asked.Store(int64(ttl))
	c.d.renewals.Add(1)
	return c.Lock.Refresh(ctx, ttl)
}
