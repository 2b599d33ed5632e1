package distlock_test

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/distlock/distlock"
	"github.com/distlock/distlock/backend"
	"github.com/distlock/distlock/memlock"
)

// Tests for defects found by reading the portable layer as an attacker
// would (issue #12): each failed before its fix.

// A TTL beyond what the library or the store can keep is rejected with a
// clear error, at Acquire, at Refresh and as a Locker default, instead of
// overflowing into a store expiry of a millisecond while the client
// computes a validity centuries ahead.
func TestTTLCeiling(t *testing.T) {
	ctx := context.Background()
	l := newLocker(t, memlock.NewStore(), backend.WaitNotify)
	for _, ttl := range []time.Duration{backend.TTLLimit + time.Second, math.MaxInt64, math.MaxInt64 - time.Millisecond + 2} {
		_, err := l.TryAcquire(ctx, "k", distlock.WithTTL(ttl))
		if !errors.Is(err, distlock.ErrInvalidConfig) || !strings.Contains(err.Error(), "maximum") {
			t.Errorf("TryAcquire with TTL %v = %v, want ErrInvalidConfig naming the maximum", ttl, err)
		}
	}
	le, err := l.TryAcquire(ctx, "k", distlock.WithTTL(backend.TTLLimit))
	if err != nil {
		t.Fatalf("TryAcquire at the limit: %v", err)
	}
	if got := time.Until(le.Deadline()); got < backend.TTLLimit/2 {
		t.Errorf("a lease at the TTL limit has %v of validity", got)
	}
	if err := le.Refresh(ctx, math.MaxInt64); !errors.Is(err, distlock.ErrInvalidConfig) {
		t.Errorf("Refresh with the largest duration = %v, want ErrInvalidConfig", err)
	}
	if err := le.Release(ctx); err != nil {
		t.Fatal(err)
	}
	d, _ := memlock.NewStore().NewDriver(nil)
	if _, err := distlock.Open(ctx, "mem://?ttl=2562047h"); !errors.Is(err, distlock.ErrInvalidConfig) {
		t.Errorf("Open with a TTL far above the limit = %v, want ErrInvalidConfig", err)
	}
	func() {
		defer func() {
			if r := recover(); r == nil || !strings.Contains(fmtRecovered(r), "maximum") {
				t.Errorf("New with a default TTL above the limit: recovered %v, want a panic naming the maximum", r)
			}
		}()
		distlock.New(d, distlock.WithDefaultTTL(math.MaxInt64)).Close()
	}()
}

func fmtRecovered(r any) string {
	if err, ok := r.(error); ok {
		return err.Error()
	}
	return ""
}

// A re-entry that races the last release of the same hold in one Locker
// acquires afresh; it never fails with ErrNotHeld, and the lease it gets
// is held.
func TestReentryRacingLastRelease(t *testing.T) {
	ctx := context.Background()
	for _, wait := range []backend.WaitKind{backend.WaitNotify, backend.WaitQueue} {
		t.Run(string(wait), func(t *testing.T) {
			l := newLocker(t, memlock.NewStore(), wait)
			const owner, rounds = "racing-owner", 300
			for i := range rounds {
				first, err := l.Acquire(ctx, "k", distlock.WithOwner(owner))
				if err != nil {
					t.Fatal(err)
				}
				var wg sync.WaitGroup
				var second *distlock.Lease
				var serr error
				wg.Go(func() { second, serr = l.TryAcquire(ctx, "k", distlock.WithOwner(owner)) })
				wg.Go(func() {
					if err := first.Release(ctx); err != nil {
						t.Errorf("round %d: release: %v", i, err)
					}
				})
				wg.Wait()
				if serr != nil {
					t.Fatalf("round %d: a re-entry racing the last release: %v", i, serr)
				}
				if second.Err() != nil {
					t.Fatalf("round %d: the racing re-entry's lease ended at once: %v", i, second.Err())
				}
				if err := second.Release(ctx); err != nil {
					t.Fatalf("round %d: releasing the racing re-entry: %v", i, err)
				}
			}
		})
	}
}

// Doubt pushed by the driver while renewals are in flight: run with -race,
// the watchdog must read each hold's deadline under the lock that the
// doubt callback writes it under.
func TestDoubtDuringRenewals(t *testing.T) {
	ctx := context.Background()
	d, _ := memlock.NewStore().NewDriver(nil)
	l := distlock.New(d, distlock.WithDefaultTTL(30*time.Millisecond), distlock.WithClockDrift(0.01, 0))
	defer l.Close()
	var leases []*distlock.Lease
	for i := range 8 {
		le, err := l.Acquire(ctx, "k"+string(rune('a'+i)))
		if err != nil {
			t.Fatal(err)
		}
		leases = append(leases, le)
	}
	stop := time.Now().Add(time.Second)
	for time.Now().Before(stop) {
		d.Partition(time.Second)
		d.Heal()
	}
	for _, le := range leases {
		_ = le.Release(ctx)
	}
}

// Err and State never report a lease held past its deadline, even when the
// watchdog goroutine that ends it has not run yet (a busy machine, a GC
// pause): checking Err before a write must be as good as the deadline.
func TestErrHonoursDeadline(t *testing.T) {
	ctx := context.Background()
	l := newLocker(t, memlock.NewStore(), backend.WaitNotify)
	for round := range 20 {
		le, err := l.TryAcquire(ctx, fmt.Sprint("k", round), distlock.WithTTL(30*time.Millisecond), distlock.WithoutAutoRenew())
		if err != nil {
			t.Fatal(err)
		}
		dl := le.Deadline()
		for stop := time.Now().Add(time.Second); time.Now().Before(stop); {
			now := time.Now()
			err, st := le.Err(), le.State()
			if err != nil {
				break
			}
			if now.After(dl) {
				t.Fatalf("round %d: %v past the deadline Err() = nil, State() = %v", round, now.Sub(dl), st)
			}
		}
		if !errors.Is(le.Err(), distlock.ErrLost) {
			t.Fatalf("round %d: Err() = %v, want ErrLost", round, le.Err())
		}
	}
}

// silentDriver is a store that never answers a lock request: a driver
// whose call ends only with its ctx, returning the bare ctx error (as a
// client blocked on a frozen server does).
type silentDriver struct{ backend.Driver }

func (silentDriver) TryAcquire(ctx context.Context, _ backend.Request) (backend.Grant, error) {
	<-ctx.Done()
	return backend.Grant{}, ctx.Err()
}

// A TryAcquire the store never answered within its ctx's deadline fails
// with an error matching ErrUnavailable, whatever the driver returned, and
// the deadline stays recognisable; a ctx the caller canceled is not
// unavailability.
func TestUnansweredTryAcquireUnavailable(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		d, err := memlock.NewStore().NewDriver(&memlock.Options{Wait: backend.WaitPoll})
		if err != nil {
			t.Fatal(err)
		}
		l := distlock.New(silentDriver{d})
		defer l.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
		defer cancel()
		_, err = l.TryAcquire(ctx, "k")
		if !errors.Is(err, distlock.ErrUnavailable) || !errors.Is(err, context.DeadlineExceeded) {
			t.Errorf("TryAcquire on a silent store = %v, want ErrUnavailable and DeadlineExceeded", err)
		}
		cctx, ccancel := context.WithCancel(context.Background())
		time.AfterFunc(20*time.Millisecond, ccancel)
		_, err = l.TryAcquire(cctx, "k")
		if errors.Is(err, distlock.ErrUnavailable) || !errors.Is(err, context.Canceled) {
			t.Errorf("TryAcquire canceled by its caller = %v, want context.Canceled only", err)
		}
	})
}
