package distlock

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/distlock/distlock/backend"
	"go.opentelemetry.io/otel/trace"
)

// A hold is one owner's hold on one key through this Locker. Re-entries
// share it: it counts its Leases and is released in the store when the
// last one is released.
type hold struct {
	key, owner string
	mode       backend.Kind // Exclusive (0) for the mutex and for permits; a side of a read-write lock (rwmutex.go)

	// Guarded by Locker.mu.
	state     holdState
	ready     chan struct{} // made by the first caller to wait (waitChan), closed by resolve
	leases    *Lease        // the first of its Leases, linked by Lease.next; nil: none
	first     Lease         // the hold's first Lease, made with it: one allocation, not two
	grant     backend.Grant
	ttl       time.Duration // the TTL renewals ask for; only grows
	autoRenew bool
	deadline  time.Time // client-side validity: reported lost at this instant
	nextRenew time.Time
	renewing  bool      // a renewal is in flight (the hold waits on the heap for its deadline only)
	renewAt   time.Time // when the renewal in flight was collected
	early     error     // loss reported by the driver before the grant was recorded
	heapIndex int
	doubt     doubtState    // doubt.go
	tel       holdTelemetry // observe.go
	permits   int           // > 0: a semaphore's permits (semaphore.go), never re-entered
	onEnd     []func()      // called when the hold ends (re-entries' extensions in flight)
}

type holdKey struct {
	key, owner string
	mode       backend.Kind
}

func (h *hold) hk() holdKey { return holdKey{h.key, h.owner, h.mode} }

// newHold returns a pending hold; label is its WithKeyAttribute label.
// Its ready channel and its list of Leases cost nothing until used.
func newHold(hk holdKey, label string) *hold {
	h := &hold{key: hk.key, owner: hk.owner, mode: hk.mode, heapIndex: -1}
	h.tel.label = label
	return h
}

// waitChan returns the channel closed when h's acquisition or release in
// the store resolves, made now if no one waits yet. Locker.mu is held.
func (h *hold) waitChan() <-chan struct{} {
	if h.ready == nil {
		h.ready = make(chan struct{})
	}
	return h.ready
}

// resolve wakes the callers waiting for h's acquisition or release in the
// store to resolve. Locker.mu is held.
func (h *hold) resolve() {
	if h.ready != nil {
		close(h.ready)
		h.ready = nil
	}
}

type holdState int

const (
	holdPending holdState = iota
	holdHeld
	holdEnded
)

// acquire is Acquire (wait) and TryAcquire, measured and traced.
func (l *Locker) acquire(ctx context.Context, key string, opts []Option, wait bool) (*Lease, error) {
	actx, op := l.tel.startAcquire(ctx, key, wait)
	le, err := l.acquireAs(actx, key, opts, wait, op.label)
	op.end(ctx, le, err)
	return le, err
}

// acquireAs acquires key; label is its WithKeyAttribute label.
func (l *Locker) acquireAs(ctx context.Context, key string, opts []Option, wait bool, label string) (*Lease, error) {
	return l.acquireMode(ctx, key, opts, wait, label, backend.Exclusive)
}

// acquireMode acquires key's mutex (mode Exclusive) or a side of its
// read-write lock.
func (l *Locker) acquireMode(ctx context.Context, key string, opts []Option, wait bool, label string, mode backend.Kind) (*Lease, error) {
	c := applyOptions(opts)
	if c.ownerErr != nil {
		return nil, fmt.Errorf("distlock: acquire %q: %w", key, c.ownerErr)
	}
	if err := checkKey(key, l.maxKey); err != nil {
		return nil, fmt.Errorf("distlock: acquire: %w", err)
	}
	ttl, err := l.ttlFor(c)
	if err != nil {
		return nil, fmt.Errorf("distlock: acquire %q: %w", key, err)
	}
	owner := c.owner
	if owner == "" {
		if o, ok := OwnerFromContext(ctx); ok {
			if err := checkOwner(o); err != nil {
				return nil, fmt.Errorf("distlock: acquire %q: the ctx's owner: %w", key, err)
			}
			owner = o
		} else {
			owner = newOwner()
		}
	}
	if !l.begin() {
		return nil, fmt.Errorf("distlock: acquire %q: %w", key, ErrClosed)
	}
	defer l.ops.Done()
	ctx, bound := l.bindClose(ctx)
	defer bound.stop()

	h, le, err := l.claim(ctx, holdKey{key, owner, mode}, ttl, c, label)
	if h == nil {
		return le, err
	}
	req := backend.Request{
		Kind: mode, Key: key, Owner: owner, TTL: ttl, Drift: l.cfg.drift(ttl),
		OnLost:     func(err error) { l.driverLost(h, err) },
		OnDoubt:    func(cause error, until time.Time) { l.driverDoubt(h, cause, until) },
		OnRestored: func() { l.driverRestored(h) },
	}
	g, err := l.obtain(ctx, h, req, wait)
	return l.settle(ctx, h, g, err, ttl, !c.noRenew)
}

// bindClose returns ctx, canceled also (with ErrClosed) when the Locker
// closes, and the binding, whose stop the caller must call when done.
// The binding is a slot in Locker.binds, not a context.AfterFunc on the
// Locker's close ctx: an acquisition then makes one context (two
// allocations) instead of three contexts and closures (six), and takes no
// lock shared with other Lockers' contexts.
func (l *Locker) bindClose(ctx context.Context) (context.Context, closeBinding) {
	ctx, cancel := context.WithCancelCause(ctx)
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		cancel(ErrClosed)
		return ctx, closeBinding{cancel: cancel, slot: -1}
	}
	b := closeBinding{l: l, cancel: cancel}
	if n := len(l.freeBinds); n > 0 {
		b.slot = l.freeBinds[n-1]
		l.freeBinds = l.freeBinds[:n-1]
		l.binds[b.slot] = cancel
	} else {
		b.slot = len(l.binds)
		l.binds = append(l.binds, cancel)
	}
	return ctx, b
}

// A closeBinding ties an operation's ctx to the Locker's Close
// (bindClose).
type closeBinding struct {
	l      *Locker // nil if the Locker was closed already
	slot   int
	cancel context.CancelCauseFunc
}

// stop unbinds the operation and cancels its ctx.
func (b closeBinding) stop() {
	if b.l != nil {
		b.l.mu.Lock()
		b.l.binds[b.slot] = nil
		b.l.freeBinds = append(b.l.freeBinds, b.slot)
		b.l.mu.Unlock()
	}
	b.cancel(context.Canceled)
}

// cancelBound cancels the ctx of every operation bound to Close. Close
// calls it once, after marking the Locker closed.
func (l *Locker) cancelBound() {
	l.mu.Lock()
	bound := slices.Clone(l.binds)
	l.mu.Unlock()
	for _, cancel := range bound {
		if cancel != nil {
			cancel(ErrClosed)
		}
	}
}

// claim either re-enters an existing hold (returning its new Lease), or
// registers a pending hold for the caller to acquire in the store. Callers
// with the same owner and key wait for a pending acquisition to resolve, so
// a store never sees one owner queue behind itself.
func (l *Locker) claim(ctx context.Context, hk holdKey, ttl time.Duration, c acquireConfig, label string) (*hold, *Lease, error) {
	for {
		l.mu.Lock()
		if hk.mode != backend.Exclusive {
			switch le, next, err := l.claimRW(ctx, hk, ttl, c); next {
			case rwDone:
				return nil, le, err
			case rwRetry:
				continue
			}
		}
		h := l.holds[hk]
		if h == nil {
			h = newHold(hk, label)
			l.holds[hk] = h
			l.mu.Unlock()
			return h, nil, nil
		}
		if h.permits > 0 {
			l.mu.Unlock()
			return nil, nil, permitOwnerErr(hk)
		}
		if h.state == holdHeld {
			l.mu.Unlock()
			le, err := l.reenter(ctx, h, ttl, c)
			if errors.Is(err, errHoldEnded) {
				continue // released or lost meanwhile: acquire afresh
			}
			return nil, le, err
		}
		// Pending, or ended and being released in the store: wait until
		// that resolves.
		ready := h.waitChan()
		l.mu.Unlock()
		select {
		case <-ready:
		case <-ctx.Done():
			return nil, nil, fmt.Errorf("distlock: acquire %q: %w", hk.key, context.Cause(ctx))
		}
	}
}

// errHoldEnded tells claim that the hold it found held ended before a
// re-entry could join it (its last Lease was released, or it was lost).
var errHoldEnded = errors.New("distlock: hold ended during re-entry")

func (l *Locker) ended(h *hold) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return h.state == holdEnded
}

// reenter adds a Lease to a held hold. A longer TTL or auto-renewal extends
// the hold; nothing a re-entry asks for shortens it.
func (l *Locker) reenter(ctx context.Context, h *hold, ttl time.Duration, c acquireConfig) (*Lease, error) {
	if l.endIfPastDeadline(h) {
		return nil, errHoldEnded // its validity ran out before the watchdog ended it
	}
	l.mu.Lock()
	longer := l.caps.PerLockTTL && ttl > h.ttl
	lock := h.grant.Lock
	l.mu.Unlock()
	if longer {
		// The extension ends with the hold too: a hold lost while the
		// driver has not answered returns at once, whatever the driver
		// does with ctx.
		rctx, cancel := context.WithCancelCause(ctx)
		l.mu.Lock()
		if h.state != holdHeld {
			l.mu.Unlock()
			cancel(nil)
			return nil, errHoldEnded
		}
		h.onEnd = append(h.onEnd, func() { cancel(errHoldEnded) })
		l.mu.Unlock()
		sent, err := l.refreshHold(rctx, h, lock, ttl)
		cancel(nil)
		if err != nil {
			l.refreshFailed(h, err)
			if l.ended(h) {
				return nil, errHoldEnded
			}
			return nil, fmt.Errorf("distlock: re-enter %q: extend to %v: %w", h.key, ttl, err)
		}
		l.extended(h, sent, ttl)
	}
	l.mu.Lock()
	if h.state != holdHeld || !time.Now().Before(h.deadline) {
		l.mu.Unlock()
		l.endIfPastDeadline(h) // never a Lease on a hold past its validity
		return nil, errHoldEnded
	}
	defer l.mu.Unlock()
	if !c.noRenew && !h.autoRenew {
		h.autoRenew = true
		l.wd.reschedule(h)
	}
	return l.newLease(ctx, h), nil
}

// settle records the outcome of a store acquisition for a pending hold.
func (l *Locker) settle(ctx context.Context, h *hold, g backend.Grant, err error, ttl time.Duration, autoRenew bool) (*Lease, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	h.resolve()
	if err == nil && (h.early != nil || l.closed) {
		cause := h.early
		if cause == nil {
			cause = ErrClosed
		}
		lock := g.Lock
		l.goCall(func() { l.releaseQuietly(lock) })
		err = cause
	}
	if err == nil {
		err = l.lateAtSettle(h, g, ttl)
	}
	if err != nil {
		h.state = holdEnded
		delete(l.holds, h.hk())
		if h.permits > 0 {
			if errors.Is(err, ErrNotAcquired) {
				return nil, fmt.Errorf("distlock: semaphore %q: not enough free permits for %d: %w", h.key, h.permits, err)
			}
			return nil, fmt.Errorf("distlock: semaphore %q: %w", h.key, err)
		}
		if h.mode != backend.Exclusive {
			return nil, fmt.Errorf("distlock: read-write lock %q (%s side): %w", h.key, h.mode, err)
		}
		return nil, fmt.Errorf("distlock: acquire %q: %w", h.key, err)
	}
	life := ttl // what the store applied, which validity counts
	if g.TTL > 0 {
		life = g.TTL
		if !l.caps.PerLockTTL {
			ttl = g.TTL // what renewals ask for
		}
	}
	h.state, h.grant, h.ttl, h.autoRenew = holdHeld, g, ttl, autoRenew
	h.deadline = g.ValidFrom.Add(life - l.cfg.drift(life))
	h.nextRenew = g.ValidFrom.Add(life / 3)
	h.tel.link = trace.SpanContextFromContext(ctx)
	l.changed(h, EventAcquired, nil)
	l.doubtAtGrant(h, g, life)
	l.wd.reschedule(h)
	l.startWatchdog()
	return l.newLease(ctx, h), nil
}

// lateAtSettle gives g's lock back and returns an error matching
// ErrUnavailable if g's validity (grantEnd, a doubt pushed while h was
// pending included) has run out by the time it is recorded: the wait's own
// check (Locker.valid) came before a scheduler delay, or a doubt pushed
// after it. Never a Lease whose Deadline has passed. Locker.mu is held.
func (l *Locker) lateAtSettle(h *hold, g backend.Grant, ttl time.Duration) error {
	end := l.grantEnd(h, g, grantLife(g, ttl))
	late := time.Since(end)
	if late < 0 {
		return nil
	}
	if lock := g.Lock; lock != nil {
		l.goCall(func() { l.releaseQuietly(lock) })
	}
	return fmt.Errorf("%w: the grant's validity ran out %v before it was recorded", ErrUnavailable, late.Round(time.Millisecond))
}

// newLease makes a Lease on h. Locker.mu is held.
func (l *Locker) newLease(ctx context.Context, h *hold) *Lease {
	le := &h.first
	if le.h != nil { // the first is taken: a re-entry
		le = new(Lease)
	}
	*le = Lease{l: l, h: h, parent: leaseBase(ctx), next: h.leases}
	if h.leases != nil {
		h.leases.prev = le
	}
	h.leases = le
	return le
}

// endLocked marks h ended and cancels its Leases with cause; the caller
// takes it out of Locker.holds. Locker.mu is held.
func (l *Locker) endLocked(h *hold, cause error) {
	h.state = holdEnded
	l.wd.remove(h)
	for _, f := range h.onEnd {
		f()
	}
	h.onEnd = nil
	for le := h.leases; le != nil; {
		next := le.next
		le.end(cause)
		le.prev, le.next = nil, nil
		le = next
	}
	h.leases = nil
}

// endHold releases h in the store and ends its Leases with cause. Until
// the store has answered, h stays in Locker.holds, ended, so that an
// acquisition by the same owner waits for the release instead of
// re-entering a hold that is going away or racing it in the store.
//
// returned is called once the driver's call returns, which may be after
// endHold has (the call outlived its ctx), or at once if h had ended
// already.
func (l *Locker) endHold(ctx context.Context, h *hold, cause error, returned func()) error {
	l.mu.Lock()
	if h.state != holdHeld {
		l.mu.Unlock()
		returned()
		return nil
	}
	return l.releaseEnded(ctx, h, cause, returned)
}

// releaseEnded ends h (held) with cause and releases it in the store.
// Locker.mu is held on entry and released before the store call, so the
// decision to end h and the end itself are one step: a re-entry cannot
// join h in between and be ended with it.
func (l *Locker) releaseEnded(ctx context.Context, h *hold, cause error, returned func()) error {
	l.endLocked(h, cause)
	lock := h.grant.Lock
	l.mu.Unlock()
	var err error
	answered := true
	if ctx.Done() == nil {
		err = lock.Release(ctx) // a ctx that cannot end: no goroutine, no closures
	} else {
		sent := time.Now()
		err, answered = l.call(ctx, lock.Release, func(error) {
			l.releaseAnswered(h)
			if returned != nil {
				returned()
			}
		})
		if !answered {
			// The client has not answered and may never (it ignores
			// ctx): the lease has ended all the same, and the lock
			// expires by its TTL if the release never arrives.
			err = fmt.Errorf("%w: release unanswered after %v (the caller's ctx ended: %w)",
				ErrUnavailable, time.Since(sent).Round(time.Millisecond), context.Cause(ctx))
		}
	}
	l.tel.storeError(ctx, "release", err)
	if err != nil {
		err = fmt.Errorf("distlock: release %q: %w", h.key, err)
	}
	if answered {
		l.releaseAnswered(h)
		if returned != nil {
			returned()
		}
	}
	l.mu.Lock()
	l.changed(h, EventReleased, releasedCause(cause, err))
	l.mu.Unlock()
	return err
}

// releaseAnswered forgets h (ended) once the store has answered its
// release: the owner may acquire again.
func (l *Locker) releaseAnswered(h *hold) {
	l.mu.Lock()
	if hk := h.hk(); l.holds[hk] == h {
		delete(l.holds, hk)
	}
	h.resolve()
	l.mu.Unlock()
}

// refreshHold refreshes h's lock for ttl, bounded by ctx whatever the
// driver does with it. It returns when the refresh was sent and its
// outcome: the driver's error, or, if ctx ended first, an error matching
// ErrUnavailable and ctx's that says the refresh went unanswered (the
// driver's own error after ctx ended says the same). A refresh the caller
// gave up on is not a loss: the caller records the error as doubt, and
// the answer, if it comes later, is recorded then (an answer after the
// deadline changes nothing).
func (l *Locker) refreshHold(ctx context.Context, h *hold, lock backend.Lock, ttl time.Duration) (time.Time, error) {
	sent := time.Now()
	err, answered := l.call(ctx, func(ctx context.Context) error { return lock.Refresh(ctx, ttl) }, func(err error) {
		if err == nil {
			l.extended(h, sent, ttl)
		} else {
			l.refreshFailed(h, err)
		}
	})
	switch {
	case !answered:
		err = fmt.Errorf("%w: refresh unanswered after %v (the caller's ctx ended: %w)",
			ErrUnavailable, time.Since(sent).Round(time.Millisecond), context.Cause(ctx))
	case err != nil && ctx.Err() != nil && !errors.Is(err, ErrNotHeld):
		err = fmt.Errorf("%w: refresh unanswered after %v (the caller's ctx ended: %w): %w",
			ErrUnavailable, time.Since(sent).Round(time.Millisecond), context.Cause(ctx), err)
	}
	l.renewal(ctx, h, sent, err)
	return sent, err
}

// releasedCause is the Cause of an EventReleased: nil for a Release the
// store confirmed; the Locker closing, or the store's error, otherwise.
func releasedCause(cause, err error) error {
	if cause != ErrReleased {
		return errors.Join(fmt.Errorf("distlock: %w", ErrClosed), err)
	}
	return err
}

func (l *Locker) releaseQuietly(lock backend.Lock) {
	ctx, cancel := context.WithTimeout(context.Background(), l.cfg.releaseTimeout)
	defer cancel()
	l.tel.storeError(ctx, "release", lock.Release(ctx))
}
