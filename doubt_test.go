package distlock_test

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/distlock/distlock"
	"github.com/distlock/distlock/backend"
	"github.com/distlock/distlock/internal/shim"
	"github.com/distlock/distlock/memlock"
)

// waitState polls le.State() until it is want or d passes.
func waitState(le *distlock.Lease, want distlock.State, d time.Duration) bool {
	deadline := time.Now().Add(d)
	for le.State() != want {
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(2 * time.Millisecond)
	}
	return true
}

// grantedAt starts b's Acquire of key with ctx and returns a channel that
// gets the time the lock was granted (then released at once), or is
// closed when the Acquire failed (failing t).
func grantedAt(ctx context.Context, t *testing.T, b *distlock.Locker, key string) <-chan time.Time {
	granted := make(chan time.Time, 1)
	go func() {
		lb, err := b.Acquire(ctx, key)
		if err != nil {
			t.Errorf("b: %v", err)
			close(granted)
			return
		}
		granted <- time.Now()
		_ = lb.Release(ctx)
	}()
	return granted
}

// A driver that reports lost contact (OnDoubt) puts the lease in doubt at
// once, shortens its validity to what the driver vouches for, brings it
// back to held when contact returns, and ends it with ErrLost at the
// shortened deadline when contact does not return.
func TestPushedDoubt(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		s := memlock.NewStore()
		da, _ := s.NewDriver(nil)
		a := distlock.New(da)
		defer a.Close()
		b := newLocker(t, s, "")
		const ttl = 3 * time.Second
		le, err := a.Acquire(ctx, "k", distlock.WithTTL(ttl))
		if err != nil {
			t.Fatal(err)
		}

		// Partitioned, then healed well within the validity: kept.
		before := le.Deadline()
		pushed := time.Now()
		da.Partition(time.Second)
		if st := le.State(); st != distlock.StateInDoubt {
			t.Fatalf("right after the driver reported lost contact, State() = %v, want in doubt", st)
		}
		if dl := le.Deadline(); dl.After(pushed.Add(time.Second)) || !dl.Before(before) {
			t.Errorf("deadline %v after a push vouching for 1s at %v (was %v): want it brought forward to within 1s",
				dl.Format(time.StampMilli), pushed.Format(time.StampMilli), before.Format(time.StampMilli))
		}
		time.Sleep(100 * time.Millisecond)
		if st := le.State(); st != distlock.StateInDoubt {
			t.Fatalf("while partitioned, State() = %v, want in doubt", st)
		}
		da.Heal()
		if !waitState(le, distlock.StateHeld, 300*time.Millisecond) {
			t.Fatalf("after contact was restored, State() = %v, want held within 300ms (err %v)", le.State(), le.Err())
		}
		if dl := le.Deadline(); time.Until(dl) < ttl/2 {
			t.Errorf("after contact was restored the deadline is %v away, want it renewed to about %v", time.Until(dl), ttl)
		}

		// Partitioned for longer than the driver vouches for: lost at the
		// shortened deadline, long before the TTL, and before anyone else
		// can hold the lock.
		pushed = time.Now()
		da.Partition(400 * time.Millisecond)
		shortened := le.Deadline()
		gotB := grantedAt(ctx, t, b, "k")
		select {
		case <-le.Done():
		case <-time.After(2 * time.Second):
			t.Fatalf("a lease in doubt was not ended within 2s of a push vouching for 400ms (deadline %v)", shortened.Format(time.StampMilli))
		}
		lostAt := time.Now()
		if lostAt.Before(shortened) {
			t.Errorf("lost at %v, before its deadline %v", lostAt.Format(time.StampMilli), shortened.Format(time.StampMilli))
		}
		if took := lostAt.Sub(pushed); took > time.Second {
			t.Errorf("lost %v after the push; want about 400ms", took)
		}
		if err := le.Err(); !errors.Is(err, distlock.ErrLost) || !strings.Contains(err.Error(), "partitioned") {
			t.Errorf("Err() = %v, want ErrLost naming the driver's cause", err)
		}
		if le.State() != distlock.StateLost {
			t.Errorf("State() = %v, want lost", le.State())
		}
		tb, ok := <-gotB
		if !ok {
			t.Fatal("b never got the lock")
		}
		if !lostAt.Before(tb) {
			t.Errorf("b held the lock at %v, before a's lease was reported lost at %v", tb.Format(time.StampMilli), lostAt.Format(time.StampMilli))
		}
		da.Heal()
	})
}

// A lease acquired WithoutAutoRenew on a store whose Refresh extends the
// lock is not refreshed behind the user's back when contact returns: it
// stays in doubt until the user's own Refresh.
func TestPushedDoubtWithoutAutoRenew(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		d, _ := memlock.NewStore().NewDriver(nil)
		l := distlock.New(d)
		defer l.Close()
		le, err := l.Acquire(ctx, "k", distlock.WithTTL(2*time.Second), distlock.WithoutAutoRenew())
		if err != nil {
			t.Fatal(err)
		}
		d.Partition(0)
		dl := le.Deadline()
		d.Heal()
		time.Sleep(300 * time.Millisecond)
		if st := le.State(); st != distlock.StateInDoubt {
			t.Errorf("State() = %v, want still in doubt: nothing refreshed it", st)
		}
		if got := le.Deadline(); !got.Equal(dl) {
			t.Errorf("deadline moved from %v to %v without a Refresh", dl, got)
		}
		if err := le.Refresh(ctx, 0); err != nil {
			t.Fatal(err)
		}
		if st := le.State(); st != distlock.StateHeld {
			t.Errorf("after Refresh, State() = %v, want held", st)
		}
	})
}

// hookDriver wraps memlock to hand the test the Request hooks and to hold
// refreshes at a gate.
type hookDriver struct {
	shim.Notifier
	req       atomic.Pointer[backend.Request]
	gate      chan struct{} // refreshes wait for it (nil: none)
	refreshed chan struct{} // receives when a refresh reaches the gate
}

func (d *hookDriver) TryAcquire(ctx context.Context, req backend.Request) (backend.Grant, error) {
	d.req.Store(&req)
	return tryAcquireThen(ctx, d.Driver, req, func(g *backend.Grant) { g.Lock = &gatedLock{Lock: g.Lock, d: d} })
}

type gatedLock struct {
	backend.Lock
	d *hookDriver
}

func (l *gatedLock) Refresh(ctx context.Context, ttl time.Duration) error {
	if l.d.gate != nil {
		select {
		case l.d.refreshed <- struct{}{}:
		default:
		}
		select {
		case <-l.d.gate:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	return l.Lock.Refresh(ctx, ttl)
}

// A refresh sent before the driver reported lost contact proves nothing
// about the store since: it does not bring the lease back to held.
func TestRefreshBeforeDoubtDoesNotRestore(t *testing.T) {
	ctx := context.Background()
	inner, _ := memlock.NewStore().NewDriver(nil)
	d := &hookDriver{Notifier: shim.Notifier{Driver: inner}, gate: make(chan struct{}), refreshed: make(chan struct{}, 1)}
	l := distlock.New(d)
	defer l.Close()
	le, err := l.Acquire(ctx, "k", distlock.WithTTL(2*time.Second), distlock.WithoutAutoRenew())
	if err != nil {
		t.Fatal(err)
	}
	res := make(chan error, 1)
	go func() { res <- le.Refresh(ctx, 0) }()
	<-d.refreshed
	d.req.Load().OnDoubt(errors.New("connection dropped"), time.Time{})
	close(d.gate)
	err = <-res
	if !errors.Is(err, distlock.ErrUnavailable) {
		t.Errorf("a refresh sent before the push returned %v, want ErrUnavailable", err)
	}
	if st := le.State(); st != distlock.StateInDoubt {
		t.Errorf("State() = %v, want in doubt", st)
	}
	if err := le.Refresh(ctx, 0); err != nil {
		t.Fatal(err)
	}
	if st := le.State(); st != distlock.StateHeld {
		t.Errorf("after a refresh sent after the push, State() = %v, want held", st)
	}
}

// A push that brings the deadline forward ends the lease at that deadline
// even while a renewal hangs (the renewal's own bound is the old deadline).
func TestPushedDeadlineWhileRenewing(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		inner, _ := memlock.NewStore().NewDriver(nil)
		d := &hookDriver{Notifier: shim.Notifier{Driver: inner}, gate: make(chan struct{}), refreshed: make(chan struct{}, 1)}
		l := distlock.New(d)
		defer l.Close()
		le, err := l.Acquire(ctx, "k", distlock.WithTTL(3*time.Second))
		if err != nil {
			t.Fatal(err)
		}
		select {
		case <-d.refreshed: // the watchdog's renewal hangs at the gate
		case <-time.After(3 * time.Second):
			t.Fatal("no renewal within the TTL")
		}
		pushed := time.Now()
		d.req.Load().OnDoubt(errors.New("connection dropped"), pushed.Add(200*time.Millisecond))
		select {
		case <-le.Done():
		case <-time.After(2 * time.Second):
			t.Fatal("the lease outlived a pushed 200ms deadline by 2s while its renewal hung")
		}
		if took := time.Since(pushed); took > time.Second {
			t.Errorf("lost %v after the push, want about 200ms", took)
		}
		if !errors.Is(le.Err(), distlock.ErrLost) {
			t.Errorf("Err() = %v, want ErrLost", le.Err())
		}
		close(d.gate)
	})
}
