package conformance

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/distlock/distlock"
	"github.com/distlock/distlock/backend"
)

// The stall case: a holder's store stops answering (its path black-holed
// both ways, or the server paused) for longer than the TTL. Whatever the
// store client does meanwhile (a client made with its library's defaults
// may ignore ctx deadlines and wait out a long read timeout), the portable
// layer owns the deadline: every lease, of every primitive, ends no later
// than its own Deadline(), and before anyone else is granted its lock.

// lateAllowance is how late after its Deadline() a lease's end may be
// observed: the timer's goroutine and the observer's must be scheduled on
// a machine whose cores may be busy. The overlap check does not depend on
// it: a rival's grant is compared with the lease's Deadline(), which the
// portable layer keeps a drift margin before the store's expiry, so the
// holder is told (Deadline, State) that its lease is over before anyone
// else can hold the lock, however late its Done observer runs.
func lateAllowance(ttl time.Duration) time.Duration { return max(100*time.Millisecond, ttl/10) }

// stallHold is one lease of one primitive held across the stall.
type stallHold struct {
	what     string
	done     <-chan struct{}
	err      func() error
	deadline func() time.Time
	// rival, if set, is started once the stall begins: another client
	// waiting for the same lock, primitive and side; it returns when it
	// was granted (and holds until the case ends).
	rival func(ctx context.Context) (time.Time, error)

	ended, rivalAt time.Time
	// refLate is how late a timer of the test's own, set for the lease's
	// deadline when the stall began, fired: the scheduler's delay at that
	// instant (a busy machine's), which the lease's end may have too.
	refLate  time.Duration
	rivalErr error
}

// stallHolds takes one lease of each primitive the store offers on a,
// with rivals on b for the overlap check.
func stallHolds(t *testing.T, e *env, a, b *client, tag string) []*stallHold {
	t.Helper()
	key := e.key(tag + "-mutex")
	hs := []*stallHold{leaseHold(t, "mutex", mustAcquire(t, a, key), func(ctx context.Context) (*distlock.Lease, error) { return b.Acquire(ctx, key) })}

	if a.Capabilities().Semaphore != "" {
		hs = append(hs, stallSemaphore(t, e, a, b, tag))
	}

	hs = append(hs, stallRWHolds(t, e, a, b, tag)...)

	hs = append(hs, stallMultiLock(t, e, a, b, tag))

	name := e.key(tag + "-election")
	ld, err := election(t, a, name).Campaign(ctxFor(t, 30*time.Second), "stalled")
	if err != nil {
		t.Fatalf("Campaign: %v", err)
	}
	eb := election(t, b, name)
	hs = append(hs, leaseHold(t, "leadership term", ld.Lease(), func(ctx context.Context) (*distlock.Lease, error) {
		rl, err := eb.Campaign(ctx, "rival")
		if err != nil {
			return nil, err
		}
		return rl.Lease(), nil
	}))
	return hs
}

// leaseHold is the stallHold of le; rival, if not nil, is another
// client's attempt at the same lock, whose lease is released when the
// case ends.
func leaseHold(t *testing.T, what string, le *distlock.Lease, rival func(ctx context.Context) (*distlock.Lease, error)) *stallHold {
	h := &stallHold{what: what, done: le.Done(), err: le.Err, deadline: le.Deadline}
	if rival != nil {
		h.rival = func(ctx context.Context) (time.Time, error) {
			rl, err := rival(ctx)
			at := time.Now()
			if err == nil {
				t.Cleanup(func() { _ = rl.Release(ctxFor(t, 10*time.Second)) })
			}
			return at, err
		}
	}
	return h
}

// stallSemaphore takes a's permit of a one-permit semaphore, b's
// semaphore on the same key its rival.
func stallSemaphore(t *testing.T, e *env, a, b *client, tag string) *stallHold {
	t.Helper()
	skey := e.key(tag + "-sem")
	sa, err := a.Semaphore(skey, 1)
	if err != nil {
		t.Fatalf("Semaphore(%q, 1): %v", skey, err)
	}
	sb, err := b.Semaphore(skey, 1)
	if err != nil {
		t.Fatalf("Semaphore(%q, 1): %v", skey, err)
	}
	le, err := sa.Acquire(ctxFor(t, 30*time.Second))
	if err != nil {
		t.Fatalf("semaphore Acquire: %v", err)
	}
	return leaseHold(t, "semaphore permit", le, func(ctx context.Context) (*distlock.Lease, error) { return sb.Acquire(ctx) })
}

// stallRWHolds takes a read hold and a write hold on a, each with b's
// opposite side as its rival; none where the store offers no read-write
// lock.
func stallRWHolds(t *testing.T, e *env, a, b *client, tag string) []*stallHold {
	t.Helper()
	var hs []*stallHold
	if ma, err := a.RWMutex(e.key(tag + "-rw-read")); err == nil {
		mb, err := b.RWMutex(e.key(tag + "-rw-read"))
		if err != nil {
			t.Fatalf("RWMutex: %v", err)
		}
		hs = append(hs, leaseHold(t, "read hold", mustRLock(t, ma), func(ctx context.Context) (*distlock.Lease, error) { return mb.Lock(ctx) }))
		wa, _ := a.RWMutex(e.key(tag + "-rw-write"))
		wb, _ := b.RWMutex(e.key(tag + "-rw-write"))
		wl, err := wa.Lock(ctxFor(t, 30*time.Second))
		if err != nil {
			t.Fatalf("RWMutex Lock: %v", err)
		}
		hs = append(hs, leaseHold(t, "write hold", wl, func(ctx context.Context) (*distlock.Lease, error) { return wb.RLock(ctx) }))
	} else if !errors.Is(err, distlock.ErrUnsupported) {
		t.Fatalf("RWMutex: %v", err)
	}
	return hs
}

// stallMultiLock takes a multi-lease of two keys on a, b's AcquireAll of
// the same keys its rival.
func stallMultiLock(t *testing.T, e *env, a, b *client, tag string) *stallHold {
	t.Helper()
	mkeys := []string{e.key(tag + "-multi-1"), e.key(tag + "-multi-2")}
	ml, err := a.AcquireAll(ctxFor(t, 30*time.Second), mkeys)
	if err != nil {
		t.Fatalf("AcquireAll(%q): %v", mkeys, err)
	}
	mh := &stallHold{what: "multi-lock", done: ml.Done(), err: ml.Err, deadline: ml.Deadline}
	mh.rival = func(ctx context.Context) (time.Time, error) {
		rl, err := b.AcquireAll(ctx, mkeys)
		at := time.Now()
		if err == nil {
			t.Cleanup(func() { _ = rl.Release(ctxFor(t, 10*time.Second)) })
		}
		return at, err
	}
	return mh
}

// runStall holds every primitive on a, stalls the store for a's driver,
// and checks that each lease ends by its own deadline and before a rival
// (on a client the stall does not reach, where the harness can partition
// one driver) is granted its lock.
func runStall(t *testing.T, e *env, a *client) {
	b := e.locker(t)
	hs := stallHolds(t, e, a, b, "stall")

	resume, rivals := stallStore(t, e, a)
	stalled := time.Now()

	// The stall outlasts every lease's validity: its deadline, at most a
	// TTL away, plus the allowance; a store may hand locks on only at its
	// own expiry, a TTL and more after the last renewal.
	bound := 3*e.ttl + 30*time.Second
	watchStall(t, hs, bound, rivals)
	resume()
	checkStall(t, e, hs, stalled, bound, rivals)
}

// stallStore stalls the store for a's driver: a partition of that driver
// where the harness can, else a paused server, where no rival can be
// granted anything (rivals false). resume ends the stall.
func stallStore(t *testing.T, e *env, a *client) (resume func(), rivals bool) {
	t.Helper()
	rivals = true
	if p, ok := e.h.(Partitioner); ok {
		resume = partition(t, p, a.d)
	} else {
		sc := serverControl(t, e)
		if err := sc.StopServer(ctxFor(t, time.Minute)); err != nil {
			t.Fatalf("StopServer: %v", err)
		}
		resume = func() {
			if err := sc.StartServer(ctxFor(t, 2*time.Minute)); err != nil {
				t.Errorf("StartServer: %v", err)
			}
		}
		rivals = false // no one can be granted anything while the server is paused
	}
	return resume, rivals
}

// watchStall records, for at most bound, when each hold ended, how late a
// timer set for its deadline fired, and (with rivals) when its rival was
// granted.
func watchStall(t *testing.T, hs []*stallHold, bound time.Duration, rivals bool) {
	var wg sync.WaitGroup
	for _, h := range hs {
		wg.Go(func() {
			select {
			case <-h.done:
				h.ended = time.Now()
			case <-time.After(bound):
			}
		})
		wg.Go(func() {
			dl := h.deadline()
			ref := time.NewTimer(time.Until(dl))
			defer ref.Stop()
			select {
			case <-ref.C:
				h.refLate = max(time.Since(dl), 0)
			case <-time.After(bound):
			}
		})
		if rivals && h.rival != nil {
			wg.Go(func() { h.rivalAt, h.rivalErr = h.rival(ctxFor(t, bound)) })
		}
	}
	wg.Wait()
}

// checkStall checks that each hold ended by its deadline (and the
// allowance), with ErrLost, and that its rival was granted only after the
// deadline.
func checkStall(t *testing.T, e *env, hs []*stallHold, stalled time.Time, bound time.Duration, rivals bool) {
	late := lateAllowance(e.ttl)
	for _, h := range hs {
		dl := h.deadline()
		switch {
		case h.ended.IsZero():
			t.Errorf("%s: still not ended %v into a stall of its store (deadline %v after the stall began; state err %v)",
				h.what, bound, dl.Sub(stalled).Round(time.Millisecond), h.err())
			continue
		case h.ended.After(dl.Add(late + h.refLate)):
			t.Errorf("%s: ended %v after its Deadline() (%v into the stall; allowed %v, and %v more that a timer of the test's own set for the deadline fired late): the lease outlived its validity while the store client had a call out",
				h.what, h.ended.Sub(dl).Round(time.Millisecond), h.ended.Sub(stalled).Round(time.Millisecond), late, h.refLate.Round(time.Millisecond))
		}
		if err := h.err(); !errors.Is(err, distlock.ErrLost) {
			t.Errorf("%s: Err() after the stall = %v, want ErrLost", h.what, err)
		}
		if !rivals || h.rival == nil {
			continue
		}
		switch {
		case h.rivalErr != nil:
			t.Errorf("%s: another client was never granted the stalled holder's lock: %v", h.what, h.rivalErr)
		case !h.rivalAt.After(dl):
			// Compared with the deadline, not with when the observer saw
			// Done close: that goroutine may be scheduled late.
			t.Errorf("%s: another client was granted the lock %v before the stalled holder's lease's Deadline() (overlap)",
				h.what, dl.Sub(h.rivalAt).Round(time.Millisecond))
		default:
			t.Logf("%s: ended %v after its deadline, %v into the stall; rival granted %v after the deadline",
				h.what, h.ended.Sub(dl).Round(time.Millisecond), h.ended.Sub(stalled).Round(time.Millisecond),
				h.rivalAt.Sub(dl).Round(time.Millisecond))
		}
	}
}

// testStallEndsAtDeadline runs the stall with the harness's own driver and
// with a driver over a user-made client (UserClients).
func testStallEndsAtDeadline(t *testing.T, e *env) {
	if _, ok := e.h.(Partitioner); !ok {
		serverControl(t, e) // skips without either hook
	}
	e.holderParts(t, func(t *testing.T, e *env, a *client) { runStall(t, e, a) })
}

// sub returns e with a key prefix of its own, for a subtest.
func (e *env) sub(tag string) *env {
	s := *e
	s.prefix = fmt.Sprintf("%s%s-", e.prefix, tag)
	return &s
}

// lockerOver makes a Locker over d (which the case closes), reporting to
// a probe of its own, as e.locker does over a new driver.
func (e *env) lockerOver(t *testing.T, d backend.Driver, opts ...distlock.LockerOption) *client {
	t.Helper()
	p := newProbe()
	opts = append(append([]distlock.LockerOption{distlock.WithDefaultTTL(e.ttl)}, p.options()...), opts...)
	l := distlock.New(d, opts...)
	t.Cleanup(func() { _ = l.Close() })
	return &client{Locker: l, d: d, probe: p}
}
