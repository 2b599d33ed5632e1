package distlock_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/distlock/distlock"
	"github.com/distlock/distlock/backend"
	"github.com/distlock/distlock/internal/shim"
	"github.com/distlock/distlock/memlock"
)

// The tests in this file run in a synctest bubble: time is virtual and
// moves only when every goroutine of the bubble is durably blocked, so the
// watchdog's, doubt's and expiry's rules are checked at their exact
// instants. time.Sleep here moves the virtual clock to an instant (it does
// not wait for anything); synctest.Wait then lets every goroutine of the
// bubble (the watchdog, renewals, timers) finish what that instant starts.

// clockDriver wraps memlock and records when each Refresh was called; with
// gate set, a Refresh hangs until the gate closes or its ctx ends.
type clockDriver struct {
	shim.Notifier
	mu        sync.Mutex
	refreshes []time.Time
	gate      chan struct{}
}

func (d *clockDriver) TryAcquire(ctx context.Context, req backend.Request) (backend.Grant, error) {
	return tryAcquireThen(ctx, d.Driver, req, func(g *backend.Grant) { g.Lock = &clockLock{Lock: g.Lock, d: d} })
}

func (d *clockDriver) calls() []time.Time {
	d.mu.Lock()
	defer d.mu.Unlock()
	return append([]time.Time(nil), d.refreshes...)
}

type clockLock struct {
	backend.Lock
	d *clockDriver
}

func (c *clockLock) Refresh(ctx context.Context, ttl time.Duration) error {
	c.d.mu.Lock()
	c.d.refreshes = append(c.d.refreshes, time.Now())
	gate := c.d.gate
	c.d.mu.Unlock()
	if gate != nil {
		select {
		case <-gate:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	return c.Lock.Refresh(ctx, ttl)
}

// sleepUntil moves the bubble's clock to at and lets every goroutine
// settle there.
func sleepUntil(at time.Time) {
	time.Sleep(time.Until(at))
	synctest.Wait()
}

func isDone(le *distlock.Lease) bool {
	select {
	case <-le.Done():
		return true
	default:
		return false
	}
}

// clockLease acquires "k" for ttl on a Locker over s through a
// clockDriver d (the Locker closed when t ends) and returns d, the lease
// and the time just before the Acquire.
func clockLease(t *testing.T, s *memlock.Store, ttl time.Duration) (*clockDriver, *distlock.Lease, time.Time) {
	t.Helper()
	inner, _ := s.NewDriver(nil)
	d := &clockDriver{Notifier: shim.Notifier{Driver: inner}}
	l := distlock.New(d)
	t.Cleanup(func() { _ = l.Close() })
	t0 := time.Now()
	le, err := l.Acquire(context.Background(), "k", distlock.WithTTL(ttl))
	if err != nil {
		t.Fatal(err)
	}
	return d, le, t0
}

// The watchdog renews an auto-renewed lease exactly every third of its TTL,
// counted from the grant and then from each renewal's sending, and each
// renewal moves the deadline to that sending + TTL − drift(TTL) (default
// drift: 1% of the TTL + 2 ms).
func TestVirtualRenewalEveryThirdOfTTL(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		const ttl = 3 * time.Second
		const drift = 30*time.Millisecond + 2*time.Millisecond
		d, le, t0 := clockLease(t, memlock.NewStore(), ttl)
		if got, want := le.Deadline(), t0.Add(ttl-drift); !got.Equal(want) {
			t.Fatalf("deadline at grant = t0%+v, want t0%+v (TTL − drift)", got.Sub(t0), want.Sub(t0))
		}
		for i := 1; i <= 3; i++ {
			due := t0.Add(time.Duration(i) * ttl / 3)
			sleepUntil(due.Add(-time.Nanosecond))
			if n := len(d.calls()); n != i-1 {
				t.Fatalf("at t0%+v, %d renewals, want %d (the next is due at t0%+v)", time.Since(t0), n, i-1, due.Sub(t0))
			}
			sleepUntil(due)
			calls := d.calls()
			if len(calls) != i || !calls[i-1].Equal(due) {
				t.Fatalf("renewals at %v (from t0), want renewal %d at t0%+v", offsets(calls, t0), i, due.Sub(t0))
			}
			if got, want := le.Deadline(), due.Add(ttl-drift); !got.Equal(want) {
				t.Fatalf("deadline after renewal %d = t0%+v, want t0%+v", i, got.Sub(t0), want.Sub(t0))
			}
			if st := le.State(); st != distlock.StateHeld {
				t.Fatalf("after renewal %d State() = %v", i, st)
			}
		}
		if err := le.Release(ctx); err != nil {
			t.Fatal(err)
		}
	})
}

func offsets(ts []time.Time, t0 time.Time) []time.Duration {
	out := make([]time.Duration, len(ts))
	for i, ts := range ts {
		out[i] = ts.Sub(t0)
	}
	return out
}

// A lease that is not renewed is lost exactly at its Deadline(), which is
// the grant + TTL − drift (here WithClockDrift(10%, 5 ms)): valid one
// nanosecond before, ended with ErrLost at it. No other owner holds the
// lock while the lease is valid (the Locker releases a lost lease's lock
// at once, so another owner may have it from that deadline on).
func TestVirtualExpiryAtDeadline(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		s := memlock.NewStore()
		a := newLocker(t, s, "", distlock.WithClockDrift(0.1, 5*time.Millisecond))
		b := newLocker(t, s, "")
		const ttl = time.Second
		t0 := time.Now()
		le, err := a.Acquire(ctx, "k", distlock.WithTTL(ttl), distlock.WithoutAutoRenew())
		if err != nil {
			t.Fatal(err)
		}
		want := t0.Add(ttl - 100*time.Millisecond - 5*time.Millisecond)
		if dl := le.Deadline(); !dl.Equal(want) {
			t.Fatalf("Deadline() = t0%+v, want t0%+v (TTL − 10%% − 5ms)", dl.Sub(t0), want.Sub(t0))
		}
		gotB := grantedAt(ctx, t, b, "k")
		sleepUntil(want.Add(-time.Nanosecond))
		if isDone(le) || le.Err() != nil || le.State() != distlock.StateHeld {
			t.Fatalf("1ns before its deadline: Done closed %v, Err() %v, State() %v; want still held", isDone(le), le.Err(), le.State())
		}
		sleepUntil(want)
		if !isDone(le) {
			t.Fatalf("at its deadline the lease is not ended (State() %v)", le.State())
		}
		if err := le.Err(); !errors.Is(err, distlock.ErrLost) {
			t.Errorf("Err() = %v, want ErrLost", err)
		}
		if st := le.State(); st != distlock.StateLost {
			t.Errorf("State() = %v, want lost", st)
		}
		tb, ok := <-gotB
		if !ok {
			t.Fatal("b never got the lock")
		}
		if tb.Before(want) {
			t.Errorf("b got the lock at t0%+v, before a's deadline t0%+v", tb.Sub(t0), want.Sub(t0))
		}
	})
}

// A renewal that goes unanswered puts the lease in doubt exactly a sixth
// of the TTL after it was sent, and the lease is lost exactly at its
// deadline while the renewal still hangs.
func TestVirtualUnansweredRenewal(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		inner, _ := memlock.NewStore().NewDriver(nil)
		d := &clockDriver{Notifier: shim.Notifier{Driver: inner}, gate: make(chan struct{})}
		defer close(d.gate)
		l := distlock.New(d)
		defer l.Close()
		const ttl = 3 * time.Second
		t0 := time.Now()
		le, err := l.Acquire(ctx, "k", distlock.WithTTL(ttl))
		if err != nil {
			t.Fatal(err)
		}
		deadline := le.Deadline()
		sent := t0.Add(ttl / 3)
		doubtAt := sent.Add(ttl / 6)
		sleepUntil(doubtAt.Add(-time.Nanosecond))
		if calls := d.calls(); len(calls) != 1 || !calls[0].Equal(sent) {
			t.Fatalf("renewals at %v, want one at t0%+v", offsets(calls, t0), sent.Sub(t0))
		}
		if st := le.State(); st != distlock.StateHeld {
			t.Fatalf("renewal unanswered for 1ns less than TTL/6: State() = %v, want held", st)
		}
		sleepUntil(doubtAt)
		if st := le.State(); st != distlock.StateInDoubt {
			t.Fatalf("renewal unanswered for TTL/6: State() = %v, want in doubt", st)
		}
		if !le.Deadline().Equal(deadline) {
			t.Errorf("deadline moved from t0%+v to t0%+v with no answer", deadline.Sub(t0), le.Deadline().Sub(t0))
		}
		sleepUntil(deadline.Add(-time.Nanosecond))
		if isDone(le) {
			t.Fatalf("lease ended 1ns before its deadline: %v", le.Err())
		}
		sleepUntil(deadline)
		if !isDone(le) || !errors.Is(le.Err(), distlock.ErrLost) {
			t.Fatalf("at its deadline with the renewal hanging: Done closed %v, Err() %v; want lost", isDone(le), le.Err())
		}
	})
}

// A lease whose renewal fails goes in doubt at that renewal, is retried
// within a tenth of the TTL, and is held again at the first retry after
// the store comes back, renewed from that retry's sending.
func TestVirtualDoubtThenRecovered(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		s := memlock.NewStore()
		const ttl = 3 * time.Second
		const drift = 30*time.Millisecond + 2*time.Millisecond
		d, le, t0 := clockLease(t, s, ttl)
		s.SetAvailable(false)
		sleepUntil(t0.Add(ttl/3 - time.Nanosecond))
		if st := le.State(); st != distlock.StateHeld {
			t.Fatalf("before the first renewal State() = %v, want held", st)
		}
		sleepUntil(t0.Add(ttl / 3))
		if st := le.State(); st != distlock.StateInDoubt {
			t.Fatalf("right after a failed renewal State() = %v, want in doubt", st)
		}
		// Retries come at most a tenth of the TTL apart.
		sleepUntil(t0.Add(ttl/3 + time.Second))
		calls := d.calls()
		if len(calls) < 1+int(time.Second/(ttl/10)) {
			t.Fatalf("renewals at %v; want retries at most TTL/10 apart", offsets(calls, t0))
		}
		for i := 1; i < len(calls); i++ {
			if gap := calls[i].Sub(calls[i-1]); gap > ttl/10 || gap < ttl/20 {
				t.Fatalf("renewals at %v: a retry %v after the previous, want in [TTL/20, TTL/10]", offsets(calls, t0), gap)
			}
		}
		if st := le.State(); st != distlock.StateInDoubt {
			t.Fatalf("store still down: State() = %v, want in doubt", st)
		}
		s.SetAvailable(true)
		back := time.Now()
		sleepUntil(back.Add(ttl / 10))
		if st := le.State(); st != distlock.StateHeld {
			t.Fatalf("TTL/10 after the store came back, State() = %v, want held", st)
		}
		calls = d.calls()
		last := calls[len(calls)-1]
		if last.Before(back) {
			t.Fatalf("held again without a renewal after the store came back (renewals at %v)", offsets(calls, t0))
		}
		if got, want := le.Deadline(), last.Add(ttl-drift); !got.Equal(want) {
			t.Errorf("deadline after recovery = t0%+v, want the last renewal t0%+v + TTL − drift", got.Sub(t0), last.Sub(t0))
		}
		if err := le.Release(ctx); err != nil {
			t.Fatal(err)
		}
	})
}
