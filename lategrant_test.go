package distlock_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/distlock/distlock"
	"github.com/distlock/distlock/backend"
	"github.com/distlock/distlock/internal/shim"
	"github.com/distlock/distlock/memlock"
)

// lateDriver hands over its first `late` grants after their validity has
// run out: the store granted at once, but the reply reached the client
// after the TTL (a slow network), or a queue driver's grant counts from a
// session confirmation older than the TTL (etcdlock keeps its older
// confirmation when it cannot renew the session before granting).
type lateDriver struct {
	shim.Notifier
	late  atomic.Int64 // grants still to hand over late
	stale bool         // late by an old ValidFrom rather than by a slow reply
	slow  time.Duration
}

func (d *lateDriver) TryAcquire(ctx context.Context, req backend.Request) (backend.Grant, error) {
	sent := time.Now()
	g, err := d.Driver.TryAcquire(ctx, req)
	if err != nil || d.late.Add(-1) < 0 {
		return g, err
	}
	if d.stale {
		g.ValidFrom = sent.Add(-2 * req.TTL)
	} else {
		g.ValidFrom = time.Time{} // the Locker counts from when it called
		time.Sleep(d.slow)
	}
	return g, nil
}

// TestLateGrantIsNoLease: a grant whose validity has already run out
// when the Locker receives it is not a lease: TryAcquire fails with
// ErrUnavailable and gives the lock back, and Acquire tries again. The
// Locker used to return such a grant as a Lease, held by every measure it
// reports at once (Context, and Done, stay open until the watchdog runs)
// though the store may already have handed the lock to someone else.
func TestLateGrantIsNoLease(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct {
		name  string
		stale bool
		ttl   time.Duration
	}{
		{"slow reply", false, 50 * time.Millisecond},
		{"stale ValidFrom", true, time.Minute},
	} {
		t.Run(tc.name, func(t *testing.T) {
			store, inner := storeNotifier(t)
			d := &lateDriver{Notifier: inner, stale: tc.stale, slow: 2 * tc.ttl}
			d.late.Store(1)
			l := distlock.New(d)
			defer l.Close()

			le, err := l.TryAcquire(ctx, "late", distlock.WithTTL(tc.ttl))
			if err == nil {
				t.Errorf("TryAcquire of a grant past its validity = lease (Err %v, deadline %v ago), want an error", le.Err(), time.Since(le.Deadline()).Round(time.Millisecond))
				_ = le.Release(ctx)
			} else if !errors.Is(err, distlock.ErrUnavailable) {
				t.Errorf("TryAcquire of a grant past its validity: %v, want ErrUnavailable", err)
			}
			if tc.stale { // the lock (a minute's TTL) was given back
				for i := 0; store.Len() != 0 && i < 200; i++ {
					time.Sleep(5 * time.Millisecond)
				}
				if store.Len() != 0 {
					t.Error("the late grant's lock was left held in the store")
				}
			}

			d.late.Store(1)
			wctx, cancel := context.WithTimeout(ctx, 5*time.Second)
			defer cancel()
			le, err = l.Acquire(wctx, "late", distlock.WithTTL(tc.ttl))
			if err != nil {
				t.Fatalf("Acquire: %v", err)
			}
			if err := le.Err(); err != nil {
				t.Errorf("Acquire returned a lease past its validity (deadline %v ago): %v", time.Since(le.Deadline()).Round(time.Millisecond), err)
			}
			_ = le.Release(ctx)
		})
	}
}

// lateMultiDriver's store steps hand over their grants late as well.
type lateMultiDriver struct{ *lateDriver }

// RefreshAll completes the Batcher; the driver declares no BatchRefresh.
func (d lateMultiDriver) RefreshAll(ctx context.Context, locks []backend.Lock, ttls []time.Duration) []error {
	return d.Driver.(backend.Batcher).RefreshAll(ctx, locks, ttls)
}

func (d lateMultiDriver) TryAcquireMulti(ctx context.Context, reqs []backend.Request) ([]backend.Grant, error) {
	sent := time.Now()
	gs, err := d.Driver.(backend.Batcher).TryAcquireMulti(ctx, reqs)
	if err != nil || d.late.Add(-1) < 0 {
		return gs, err
	}
	for i := range gs {
		gs[i].ValidFrom = sent.Add(-2 * reqs[i].TTL)
	}
	return gs, nil
}

// storeNotifier returns a new memlock store and a driver of it that is
// only a backend.Driver and Notifier (shim.Notifier).
func storeNotifier(t *testing.T) (*memlock.Store, shim.Notifier) {
	t.Helper()
	store := memlock.NewStore()
	inner, err := store.NewDriver(nil)
	if err != nil {
		t.Fatal(err)
	}
	return store, shim.Notifier{Driver: inner}
}

// TestLateMultiGrantIsNoLease: the same for a multi-lock's one store
// step: TryAcquireAll fails with ErrUnavailable and gives every key back;
// AcquireAll tries again.
func TestLateMultiGrantIsNoLease(t *testing.T) {
	ctx := context.Background()
	store, inner := storeNotifier(t)
	d := lateMultiDriver{&lateDriver{Notifier: inner, stale: true}}
	d.late.Store(1)
	l := distlock.New(d)
	defer l.Close()
	keys := []string{"late/a", "late/b"}
	m, err := l.TryAcquireAll(ctx, keys, distlock.WithTTL(time.Minute))
	if err == nil {
		t.Errorf("TryAcquireAll of grants past their validity = multi-lease (Err %v), want an error", m.Err())
		_ = m.Release(ctx)
	} else if !errors.Is(err, distlock.ErrUnavailable) {
		t.Errorf("TryAcquireAll of grants past their validity: %v, want ErrUnavailable", err)
	}
	for i := 0; store.Len() != 0 && i < 200; i++ {
		time.Sleep(5 * time.Millisecond)
	}
	if n := store.Len(); n != 0 {
		t.Errorf("%d of the late grants' locks left held in the store", n)
	}
	d.late.Store(1)
	wctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	m, err = l.AcquireAll(wctx, keys, distlock.WithTTL(time.Minute))
	if err != nil {
		t.Fatalf("AcquireAll: %v", err)
	}
	if err := m.Err(); err != nil {
		t.Errorf("AcquireAll returned a multi-lease past its validity: %v", err)
	}
	_ = m.Release(ctx)
}

// doubtGrantDriver, for its first `doubts` grants, pushes a doubt while
// the request is pending (OnDoubt, its validity ending before the grant
// arrives) and hands over the grant counted from before that doubt, as
// etcdlock does when its session's keep-alives stop answering while a
// waiter is granted: the grant's own validity has not run out, the
// session's has.
type doubtGrantDriver struct {
	shim.Notifier
	doubts atomic.Int64
}

func (d *doubtGrantDriver) TryAcquire(ctx context.Context, req backend.Request) (backend.Grant, error) {
	sent := time.Now()
	g, err := d.Driver.TryAcquire(ctx, req)
	if err != nil || d.doubts.Add(-1) < 0 {
		return g, err
	}
	req.OnDoubt(errors.New("session keep-alive unanswered"), time.Now().Add(-time.Millisecond))
	g.ValidFrom = sent
	return g, nil
}

// TestGrantInDoubtPastItsValidityIsNoLease: a doubt the driver pushed
// while the request was pending ends the grant's validity at the doubt's
// end; a grant that arrives after that is not a lease, as one that arrives
// after its own validity is not (TestLateGrantIsNoLease). The Locker used
// to return it as a Lease whose Deadline had already passed (the fault
// suite's etcd3 run: holds granted 200-350 ms past their Deadline, ended
// by the watchdog right after the user began to work under them).
func TestGrantInDoubtPastItsValidityIsNoLease(t *testing.T) {
	ctx := context.Background()
	_, inner := storeNotifier(t)
	d := &doubtGrantDriver{Notifier: inner}
	l := distlock.New(d)
	defer l.Close()

	d.doubts.Store(1)
	le, err := l.TryAcquire(ctx, "doubted", distlock.WithTTL(time.Minute))
	if err == nil {
		t.Errorf("TryAcquire of a grant whose doubt ran out = lease (Err %v, deadline %v ago), want an error", le.Err(), time.Since(le.Deadline()).Round(time.Millisecond))
		_ = le.Release(ctx)
	} else if !errors.Is(err, distlock.ErrUnavailable) {
		t.Errorf("TryAcquire of a grant whose doubt ran out: %v, want ErrUnavailable", err)
	}
	// The lock (a minute's TTL) was given back: another owner takes it.
	other := distlock.New(inner)
	defer other.Close()
	wctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	le2, err := other.Acquire(wctx, "doubted", distlock.WithTTL(time.Minute))
	if err != nil {
		t.Fatalf("the grant's lock was not given back: %v", err)
	}
	_ = le2.Release(ctx)

	d.doubts.Store(1)
	le, err = l.Acquire(wctx, "doubted", distlock.WithTTL(time.Minute))
	if err != nil {
		t.Fatalf("Acquire: %v", err)
	}
	if !time.Now().Before(le.Deadline()) || le.Err() != nil {
		t.Errorf("Acquire returned a lease past its validity (deadline %v ago, Err %v)", time.Since(le.Deadline()).Round(time.Millisecond), le.Err())
	}
	_ = le.Release(ctx)
}
