package distlock

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/distlock/distlock/backend"
	"github.com/distlock/distlock/memlock"
)

// stallingFake is a driver over memlock (polling) whose refreshes, once
// stalled, wait until healed or until their ctx ends. A refresh whose ctx
// ends first is answered as sqllock answered before issue 27 (the
// connection pinned for the lock closed under the statement: "not held"),
// so a ctx ending too early costs the lease. It records each refresh
// ctx's deadline.
type stallingFake struct {
	backend.Driver
	mu        sync.Mutex
	stall     chan struct{} // nil: not stalled
	deadlines map[backend.Lock]time.Time
}

type stallingLock struct {
	backend.Lock
	f *stallingFake
}

func newStallingFake(t *testing.T) *stallingFake {
	t.Helper()
	d, err := memlock.NewStore().NewDriver(&memlock.Options{Wait: backend.WaitPoll})
	if err != nil {
		t.Fatal(err)
	}
	return &stallingFake{Driver: d, deadlines: map[backend.Lock]time.Time{}}
}

func (f *stallingFake) Capabilities() backend.Capabilities {
	c := f.Driver.Capabilities()
	c.Semaphore, c.RW, c.MultiAtomic = "", "", false
	return c
}

func (f *stallingFake) TryAcquire(ctx context.Context, req backend.Request) (backend.Grant, error) {
	g, err := f.Driver.TryAcquire(ctx, req)
	if err == nil {
		g.Lock = &stallingLock{Lock: g.Lock, f: f}
	}
	return g, err
}

func (f *stallingFake) setStall(on bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	switch {
	case on && f.stall == nil:
		f.stall = make(chan struct{})
	case !on && f.stall != nil:
		close(f.stall)
		f.stall = nil
	}
}

// wait waits out a stall for the refreshes of locks; it reports whether
// they may go on (false: ctx ended first).
func (f *stallingFake) wait(ctx context.Context, locks ...backend.Lock) bool {
	f.mu.Lock()
	dl, _ := ctx.Deadline()
	for _, l := range locks {
		f.deadlines[l] = dl
	}
	stall := f.stall
	f.mu.Unlock()
	if stall == nil {
		return true
	}
	select {
	case <-stall:
		return true
	case <-ctx.Done():
		return false
	}
}

func (f *stallingFake) deadlineOf(l backend.Lock) time.Time {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.deadlines[l]
}

var errConnClosed = fmt.Errorf("fake: refresh: its connection failed: %w", backend.ErrNotHeld)

func (l *stallingLock) Refresh(ctx context.Context, ttl time.Duration) error {
	if !l.f.wait(ctx, l) {
		return errConnClosed
	}
	return l.Lock.Refresh(ctx, ttl)
}

// batchingFake is a stallingFake with a batch refresh (Batcher).
type batchingFake struct{ *stallingFake }

func (f batchingFake) Capabilities() backend.Capabilities {
	c := f.stallingFake.Capabilities()
	c.BatchRefresh, c.MultiAtomic = true, false
	return c
}

func (f batchingFake) TryAcquireMulti(context.Context, []backend.Request) ([]backend.Grant, error) {
	return nil, backend.ErrUnsupported
}

func (f batchingFake) RefreshAll(ctx context.Context, locks []backend.Lock, ttls []time.Duration) []error {
	errs := make([]error, len(locks))
	if !f.wait(ctx, locks...) {
		for i := range errs {
			errs[i] = errConnClosed
		}
		return errs
	}
	for i, l := range locks {
		errs[i] = l.(*stallingLock).Lock.Refresh(ctx, ttls[i])
	}
	return errs
}

// TestRenewalBoundByOwnDeadline (issue 27, item 3): a short lease and a
// long one renewed together while the store stalls for longer than the
// short lease's validity. Each renewal is bounded by its own lease's
// deadline (a batch by its latest): the short lease ends at its deadline,
// the long one's renewal is not cut short with it, and is answered once the
// stall ends. Before, the whole batch's ctx ended at the earliest
// deadline: the long lease lost its renewal, and with it (on a driver that
// answers a cut refresh as "not held", as sqllock did) the lease, with
// most of its validity left.
func TestRenewalBoundByOwnDeadline(t *testing.T) {
	for _, batch := range []bool{false, true} {
		t.Run(fmt.Sprintf("batch=%v", batch), func(t *testing.T) {
			sf := newStallingFake(t)
			var d backend.Driver = sf
			if batch {
				d = batchingFake{sf}
			}
			l := New(d)
			defer l.Close()
			if batch != (l.batch != nil) {
				t.Fatalf("batch %v, Locker's BatchRefresher %v", batch, l.batch)
			}
			ctx := context.Background()
			// Without auto-renewal, so that the watchdog only watches
			// their deadlines: the test sends the renewal itself, as the
			// watchdog sends a batch.
			short, err := l.Acquire(ctx, "short", WithTTL(300*time.Millisecond), WithoutAutoRenew())
			if err != nil {
				t.Fatal(err)
			}
			long, err := l.Acquire(ctx, "long", WithTTL(time.Minute), WithoutAutoRenew())
			if err != nil {
				t.Fatal(err)
			}
			sf.setStall(true)
			due := []*hold{short.h, long.h}
			l.mu.Lock()
			now := time.Now()
			for _, h := range due {
				h.renewing, h.renewAt = true, now
				l.wd.reschedule(h)
			}
			l.mu.Unlock()
			renewed := make(chan struct{})
			go func() { defer close(renewed); l.renew(due) }()

			select {
			case <-short.Done():
			case <-time.After(20 * time.Second):
				t.Fatal("the short lease did not end at its deadline")
			}
			if late := time.Since(short.Deadline()); late > time.Second {
				t.Errorf("the short lease ended %v after its deadline", late)
			}
			if err := long.Err(); err != nil {
				t.Fatalf("the long lease ended with the short one's deadline: %v", err)
			}
			sf.setStall(false)
			select {
			case <-renewed:
			case <-time.After(20 * time.Second):
				t.Fatal("the renewal did not return after the stall ended")
			}
			if err := long.Err(); err != nil {
				t.Errorf("the long lease after the stall: %v", err)
			}
			if s := long.State(); s != StateHeld {
				t.Errorf("the long lease after the stall: %v, want held", s)
			}
			if got, want := sf.deadlineOf(long.h.grant.Lock), long.h.deadline; got.Before(want.Add(-time.Minute / 2)) {
				t.Errorf("the long lease's renewal ctx ended %v before its deadline", want.Sub(got).Round(time.Millisecond))
			}
			if err := short.Err(); !errors.Is(err, ErrLost) {
				t.Errorf("the short lease: Err() = %v, want ErrLost (its late answer must change nothing)", err)
			}
		})
	}
}

// TestRenewingHoldEndsAtPushedDeadline: a hold whose renewal is in flight
// stays watched for its deadline, also when the driver brings the
// deadline forward (OnDoubt with an until) meanwhile. (This was a timer of
// its own per hold before, while the hold was off the watchdog's heap.)
func TestRenewingHoldEndsAtPushedDeadline(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		d, _ := memlock.NewStore().NewDriver(nil)
		l := New(d)
		defer l.Close()
		le, err := l.Acquire(context.Background(), "pushed", WithTTL(time.Minute))
		if err != nil {
			t.Fatal(err)
		}
		h := le.h
		l.mu.Lock()
		h.renewing, h.renewAt = true, time.Now() // as collect marks it, on the heap
		l.wd.reschedule(h)
		l.mu.Unlock()
		until := time.Now().Add(time.Second) // less the drift margin (602ms for a minute's TTL)
		l.driverDoubt(h, errors.New("connection dropped"), until)
		if dl := le.Deadline(); !dl.After(time.Now()) || dl.After(until) {
			t.Fatalf("deadline %v from now, want before the pushed until (%v from now)", time.Until(dl), time.Until(until))
		}
		select {
		case <-le.Done():
		case <-time.After(20 * time.Second):
			t.Fatal("the hold was not ended at the deadline its driver pushed")
		}
		if late := time.Since(le.Deadline()); late > time.Second {
			t.Errorf("ended %v after the pushed deadline", late)
		}
		l.renewed(h, h.renewAt, time.Minute, nil) // its late answer
		if err := le.Err(); !errors.Is(err, ErrLost) {
			t.Errorf("after the late answer: Err() = %v, want ErrLost", err)
		}
		l.mu.Lock()
		defer l.mu.Unlock()
		if h.heapIndex >= 0 {
			t.Error("the ended hold is still on the watchdog's heap")
		}
	})
}
