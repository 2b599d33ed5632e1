package distlock_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/distlock/distlock"
	"github.com/distlock/distlock/memlock"
)

// These tests stall the driver as a black hole under a client that
// ignores ctx (memlock.Driver.Stall): every call, Refresh and Release
// included, blocks until Heal whatever its ctx, and nothing reports doubt.
// The deadline is the portable layer's: each lease ends at it all the same.

// stallTTL is short, so that the cases are quick; the bounds below are
// generous multiples of it for a machine whose cores are busy.
const stallTTL = 300 * time.Millisecond

// stallEvents keeps a Locker's events.
type stallEvents struct {
	mu  sync.Mutex
	evs []distlock.Event
	ch  chan distlock.Event
}

func newStallEvents() *stallEvents { return &stallEvents{ch: make(chan distlock.Event, 1024)} }

func (e *stallEvents) add(ev distlock.Event) {
	e.mu.Lock()
	e.evs = append(e.evs, ev)
	e.mu.Unlock()
	select {
	case e.ch <- ev:
	default:
	}
}

func (e *stallEvents) all() []distlock.Event {
	e.mu.Lock()
	defer e.mu.Unlock()
	return append([]distlock.Event(nil), e.evs...)
}

// waitFor waits for an event of kind on key.
func (e *stallEvents) waitFor(t *testing.T, kind distlock.EventKind, key string, bound time.Duration) {
	t.Helper()
	for _, ev := range e.all() {
		if ev.Kind == kind && ev.Key == key {
			return
		}
	}
	timeout := time.After(bound)
	for {
		select {
		case ev := <-e.ch:
			if ev.Kind == kind && ev.Key == key {
				return
			}
		case <-timeout:
			t.Fatalf("no %v event for %q within %v", kind, key, bound)
		}
	}
}

func stalledLocker(t *testing.T, opts ...distlock.LockerOption) (*memlock.Driver, *distlock.Locker, *stallEvents) {
	t.Helper()
	d, err := memlock.NewStore().NewDriver(nil)
	if err != nil {
		t.Fatal(err)
	}
	ev := newStallEvents()
	opts = append([]distlock.LockerOption{distlock.WithDefaultTTL(stallTTL), distlock.WithEvents(ev.add),
		distlock.WithReleaseTimeout(time.Second)}, opts...)
	l := distlock.New(d, opts...)
	t.Cleanup(func() {
		d.Heal()
		_ = l.Close()
	})
	return d, l, ev
}

// TestStallEndsEveryLeaseAtDeadline: with every call of the driver hung
// (renewals, a user's Refresh, a re-entry's extension, a MultiLease's
// Refresh), every primitive's lease ends no later than its Deadline(), the
// calls return then, and the late answers after Heal change nothing.
func TestStallEndsEveryLeaseAtDeadline(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		d, l, evs := stalledLocker(t)
		ctx := context.Background()
		type held struct {
			what     string
			key      string
			done     <-chan struct{}
			err      func() error
			deadline func() time.Time
			ended    time.Time
		}
		var hs []*held
		add := func(what string) func(*distlock.Lease, error) *distlock.Lease {
			return func(le *distlock.Lease, err error) *distlock.Lease {
				t.Helper()
				if err != nil {
					t.Fatalf("%s: %v", what, err)
				}
				hs = append(hs, &held{what: what, key: le.Key(), done: le.Done(), err: le.Err, deadline: le.Deadline})
				return le
			}
		}
		add("mutex")(l.Acquire(ctx, "mutex"))
		noRenew := add("lease refreshed by its user")(l.Acquire(ctx, "user-refresh", distlock.WithoutAutoRenew()))
		reentered := add("re-entered lease")(l.Acquire(ctx, "reenter"))
		sem, err := l.Semaphore("sem", 2)
		if err != nil {
			t.Fatal(err)
		}
		add("semaphore permit")(sem.Acquire(ctx))
		rw, err := l.RWMutex("rw-read")
		if err != nil {
			t.Fatal(err)
		}
		add("read hold")(rw.RLock(ctx))
		rw2, _ := l.RWMutex("rw-write")
		add("write hold")(rw2.Lock(ctx))
		ml, err := l.AcquireAll(ctx, []string{"multi-1", "multi-2"})
		if err != nil {
			t.Fatal(err)
		}
		hs = append(hs, &held{what: "multi-lock", key: "multi-1", done: ml.Done(), err: ml.Err, deadline: ml.Deadline})
		el, err := l.Election("election")
		if err != nil {
			t.Fatal(err)
		}
		ld, err := el.Campaign(ctx, "me")
		if err != nil {
			t.Fatal(err)
		}
		add("leadership term")(ld.Lease(), nil)

		d.Stall()
		stalled := time.Now()
		calls := map[string]chan error{"Lease.Refresh": make(chan error, 1), "MultiLease.Refresh": make(chan error, 1)}
		go func() { calls["Lease.Refresh"] <- noRenew.Refresh(ctx, 0) }()
		go func() { calls["MultiLease.Refresh"] <- ml.Refresh(ctx, 0) }()
		// A re-entry asking for a longer TTL: its extension hangs too. Once
		// the hold is lost it acquires afresh, which waits for the stall to end
		// (acquisitions are not leases: they have no deadline of their own).
		reentry := make(chan error, 1)
		go func() {
			rctx, cancel := context.WithTimeout(ctx, 5*stallTTL)
			defer cancel()
			le, err := l.Acquire(rctx, "reenter", distlock.WithOwner(reentered.Owner()), distlock.WithTTL(10*stallTTL))
			if err == nil {
				_ = le.Release(ctx)
			}
			reentry <- err
		}()

		bound := 20 * stallTTL
		var wg sync.WaitGroup
		for _, h := range hs {
			wg.Go(func() {
				select {
				case <-h.done:
					h.ended = time.Now()
				case <-time.After(bound):
				}
			})
		}
		wg.Wait()
		for _, h := range hs {
			dl := h.deadline()
			switch {
			case h.ended.IsZero():
				t.Errorf("%s: not ended %v into the stall (deadline %v into it)", h.what, bound, dl.Sub(stalled).Round(time.Millisecond))
			case h.ended.After(dl.Add(stallTTL)):
				t.Errorf("%s: ended %v after its deadline", h.what, h.ended.Sub(dl).Round(time.Millisecond))
			}
			if err := h.err(); !errors.Is(err, distlock.ErrLost) {
				t.Errorf("%s: Err() = %v, want ErrLost", h.what, err)
			}
		}
		for what, ch := range calls {
			select {
			case err := <-ch:
				if err == nil {
					t.Errorf("%s on a lease that ended while it was out: nil error", what)
				}
				t.Logf("%s: %v", what, err)
			case <-time.After(bound):
				t.Errorf("%s: still not returned %v into the stall, after its lease ended", what, bound)
			}
		}

		d.Heal() // the late answers come now
		select {
		case err := <-reentry:
			t.Logf("re-entry: %v", err)
		case <-time.After(bound):
			t.Errorf("re-entry: not returned %v after the stall ended", bound)
		}
		if err := l.Close(); err != nil {
			t.Logf("Close: %v", err)
		} // waits for them
		for _, h := range hs {
			if err := h.err(); !errors.Is(err, distlock.ErrLost) {
				t.Errorf("%s: after the late answers, Err() = %v, want ErrLost still", h.what, err)
			}
		}
		type grant struct {
			key   string
			token uint64
		}
		lost := map[grant]bool{}
		for _, ev := range evs.all() {
			g := grant{ev.Key, ev.Token}
			switch {
			case ev.Kind == distlock.EventLost:
				lost[g] = true
			case ev.Kind == distlock.EventAcquired:
				lost[g] = false // a new hold (the same owner may re-enter the store's hold, token and all)
			case lost[g]:
				t.Errorf("%v event for %q (token %d) after its loss: a late answer changed something", ev.Kind, ev.Key, ev.Token)
			}
		}
	})
}

// stalledCallErr waits (20 TTLs at most) for the error on done of a call
// (what) whose ctx ended while the store did not answer, fails t unless
// it is ErrUnavailable and DeadlineExceeded, and returns it.
func stalledCallErr(t *testing.T, done <-chan error, what string) error {
	t.Helper()
	var err error
	select {
	case err = <-done:
	case <-time.After(20 * stallTTL):
		t.Fatal(what + " still not returned 20 TTLs after its ctx ended")
	}
	if !errors.Is(err, distlock.ErrUnavailable) || !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("%s = %v, want ErrUnavailable and DeadlineExceeded", what, err)
	}
	t.Logf("%s: %v", what, err)
	return err
}

// TestStalledReleaseReturnsAtCtx: a Release whose driver call hangs
// returns when its ctx ends, the lease has ended already, and an Acquire
// by the same owner waits for the release's late answer instead of racing
// it in the store.
func TestStalledReleaseReturnsAtCtx(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		d, l, _ := stalledLocker(t)
		ctx := context.Background()
		le, err := l.Acquire(ctx, "release", distlock.WithTTL(10*stallTTL))
		if err != nil {
			t.Fatal(err)
		}
		d.Stall()
		rctx, cancel := context.WithTimeout(ctx, stallTTL/3)
		defer cancel()
		done := make(chan error, 1)
		go func() { done <- le.Release(rctx) }()
		stalledCallErr(t, done, "Release")
		select {
		case <-le.Done():
		default:
			t.Error("Done not closed after Release returned")
		}
		if err := le.Err(); !errors.Is(err, distlock.ErrReleased) {
			t.Errorf("Err() = %v, want ErrReleased", err)
		}
		again := make(chan error, 1)
		go func() {
			le2, err := l.Acquire(ctx, "release", distlock.WithOwner(le.Owner()))
			if err == nil {
				if le2.Token() == le.Token() {
					err = errors.New("re-acquired with the released hold's token: it re-entered a hold being released")
				}
				_ = le2.Release(ctx)
			}
			again <- err
		}()
		d.Heal()
		select {
		case err := <-again:
			if err != nil {
				t.Errorf("Acquire by the same owner after the late release: %v", err)
			}
		case <-time.After(20 * stallTTL):
			t.Fatal("Acquire by the same owner not returned after the stall ended")
		}
	})
}

// TestStalledRefreshIsDoubt: a user's Refresh whose ctx ends before the
// driver answers returns then, saying so; the lease is in doubt, not lost,
// and the answer that comes after Heal (within the validity) is recorded:
// the lease is held again.
func TestStalledRefreshIsDoubt(t *testing.T) {
	d, l, evs := stalledLocker(t)
	ctx := context.Background()
	le, err := l.Acquire(ctx, "refresh", distlock.WithTTL(30*stallTTL), distlock.WithoutAutoRenew())
	if err != nil {
		t.Fatal(err)
	}
	before := le.Deadline()
	d.Stall()
	rctx, cancel := context.WithTimeout(ctx, stallTTL/3)
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- le.Refresh(rctx, 0) }()
	err = stalledCallErr(t, done, "Refresh")
	if errors.Is(err, distlock.ErrLost) {
		t.Errorf("Refresh = %v, want ErrUnavailable and DeadlineExceeded, not ErrLost", err)
	}
	if s := le.State(); s != distlock.StateInDoubt {
		t.Errorf("State() = %v after an unanswered refresh, want in doubt", s)
	}
	d.Heal()
	evs.waitFor(t, distlock.EventRestored, "refresh", 20*stallTTL)
	if s := le.State(); s != distlock.StateHeld {
		t.Errorf("State() = %v after the late answer, want held", s)
	}
	if !le.Deadline().After(before) {
		t.Errorf("the late successful answer did not extend the deadline (%v, before %v)", le.Deadline(), before)
	}
}

// TestStalledReentryKeepsHold: a re-entry asking for a longer TTL whose
// extension goes unanswered until its short ctx ends fails, and the hold
// stays: in doubt, not lost.
func TestStalledReentryKeepsHold(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		d, l, _ := stalledLocker(t)
		ctx := context.Background()
		le, err := l.Acquire(ctx, "reenter", distlock.WithTTL(30*stallTTL), distlock.WithoutAutoRenew())
		if err != nil {
			t.Fatal(err)
		}
		d.Stall()
		actx, cancel := context.WithTimeout(le.Context(), stallTTL/3)
		defer cancel()
		done := make(chan error, 1)
		go func() {
			le2, err := l.Acquire(actx, "reenter", distlock.WithTTL(100*stallTTL))
			if err == nil {
				err = errors.New("re-entered while the extension was unanswered")
				_ = le2.Release(ctx)
			}
			done <- err
		}()
		stalledCallErr(t, done, "re-entry")
		if err := le.Err(); err != nil {
			t.Errorf("the first lease after the cut extension: Err() = %v, want nil", err)
		}
		if s := le.State(); s != distlock.StateInDoubt {
			t.Errorf("State() = %v, want in doubt", s)
		}
	})
}
