package distlock

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/distlock/distlock/backend"
)

// A hold is one owner's hold on one key through this Locker. Re-entries
// share it: it counts its Leases and is released in the store when the
// last one is released.
type hold struct {
	key, owner string

	// Guarded by Locker.mu.
	state     holdState
	ready     chan struct{} // closed when a pending acquisition resolves
	leases    map[*Lease]struct{}
	grant     backend.Grant
	ttl       time.Duration // the TTL renewals ask for; only grows
	autoRenew bool
	deadline  time.Time // client-side validity: reported lost at this instant
	nextRenew time.Time
	renewing  bool  // a renewal is in flight (the hold is off the heap)
	doubt     error // last renewal error or pushed doubt, while still inside validity
	early     error // loss reported by the driver before the grant was recorded
	heapIndex int

	// Doubt pushed by the driver (backend.Request.OnDoubt): a refresh sent
	// before doubtAt proves nothing about the store after it.
	doubtAt    time.Time
	doubtUntil time.Time   // the driver's until, kept for a pending hold
	restoredAt time.Time   // the driver's last OnRestored
	checking   bool        // in doubt: the watchdog refreshes it even without auto-renewal
	expiry     *time.Timer // ends it at its deadline while a renewal is in flight (off the heap)
}

type holdKey struct{ key, owner string }

type holdState int

const (
	holdPending holdState = iota
	holdHeld
	holdEnded
)

func (l *Locker) acquire(ctx context.Context, key string, opts []Option, wait bool) (*Lease, error) {
	var c acquireConfig
	for _, o := range opts {
		o(&c)
	}
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
			owner = o
		} else {
			owner = newOwner()
		}
	}
	if !l.begin() {
		return nil, fmt.Errorf("distlock: acquire %q: %w", key, ErrClosed)
	}
	defer l.ops.Done()
	ctx, stop := l.bindClose(ctx)
	defer stop()

	h, le, err := l.claim(ctx, holdKey{key, owner}, ttl, c)
	if h == nil {
		return le, err
	}
	req := backend.Request{
		Key: key, Owner: owner, TTL: ttl, Drift: l.cfg.drift(ttl),
		OnLost:     func(err error) { l.driverLost(h, err) },
		OnDoubt:    func(cause error, until time.Time) { l.driverDoubt(h, cause, until) },
		OnRestored: func() { l.driverRestored(h) },
	}
	g, err := l.obtain(ctx, req, wait)
	return l.settle(ctx, h, g, err, ttl, !c.noRenew)
}

// bindClose returns ctx, canceled also when the Locker closes.
func (l *Locker) bindClose(ctx context.Context) (context.Context, func()) {
	ctx, cancel := context.WithCancelCause(ctx)
	stop := context.AfterFunc(l.closeCtx, func() { cancel(ErrClosed) })
	return ctx, func() { stop(); cancel(context.Canceled) }
}

// claim either re-enters an existing hold (returning its new Lease), or
// registers a pending hold for the caller to acquire in the store. Callers
// with the same owner and key wait for a pending acquisition to resolve, so
// a store never sees one owner queue behind itself.
func (l *Locker) claim(ctx context.Context, hk holdKey, ttl time.Duration, c acquireConfig) (*hold, *Lease, error) {
	for {
		l.mu.Lock()
		h := l.holds[hk]
		if h == nil {
			h = &hold{key: hk.key, owner: hk.owner, ready: make(chan struct{}), leases: map[*Lease]struct{}{}, heapIndex: -1}
			l.holds[hk] = h
			l.mu.Unlock()
			return h, nil, nil
		}
		if h.state == holdHeld {
			l.mu.Unlock()
			le, err := l.reenter(ctx, h, ttl, c)
			return nil, le, err
		}
		ready := h.ready
		l.mu.Unlock()
		select {
		case <-ready:
		case <-ctx.Done():
			return nil, nil, fmt.Errorf("distlock: acquire %q: %w", hk.key, context.Cause(ctx))
		}
	}
}

// reenter adds a Lease to a held hold. A longer TTL or auto-renewal extends
// the hold; nothing a re-entry asks for shortens it.
func (l *Locker) reenter(ctx context.Context, h *hold, ttl time.Duration, c acquireConfig) (*Lease, error) {
	l.mu.Lock()
	longer := l.caps.PerLockTTL && ttl > h.ttl
	lock := h.grant.Lock
	l.mu.Unlock()
	if longer {
		sent := time.Now()
		if err := lock.Refresh(ctx, ttl); err != nil {
			l.refreshFailed(h, err)
			return nil, fmt.Errorf("distlock: re-enter %q: extend to %v: %w", h.key, ttl, err)
		}
		l.extended(h, sent, ttl)
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if h.state != holdHeld {
		return nil, fmt.Errorf("distlock: re-enter %q: %w", h.key, ErrNotHeld)
	}
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
	close(h.ready)
	if err == nil && (h.early != nil || l.closed) {
		cause := h.early
		if cause == nil {
			cause = ErrClosed
		}
		lock := g.Lock
		l.goBackground(func() { l.releaseQuietly(lock) })
		err = cause
	}
	if err != nil {
		h.state = holdEnded
		delete(l.holds, holdKey{h.key, h.owner})
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
	if h.doubt != nil {
		// The driver lost contact while the acquisition was finishing.
		if g.ValidFrom.After(h.doubtAt) {
			h.doubt = nil // the grant itself was confirmed after that
		} else {
			if !h.doubtUntil.IsZero() {
				h.deadline = earliest(h.deadline, h.doubtUntil.Add(-l.cfg.drift(life)))
			}
			h.checking = l.mayRecheck(h)
			h.nextRenew = l.recheckAt(h, time.Now())
		}
	}
	l.wd.reschedule(h)
	l.startWatchdog()
	return l.newLease(ctx, h), nil
}

// newLease makes a Lease on h. Locker.mu is held.
func (l *Locker) newLease(ctx context.Context, h *hold) *Lease {
	le := &Lease{l: l, h: h}
	base := ContextWithOwner(context.WithoutCancel(ctx), h.owner)
	le.ctx, le.cancel = context.WithCancelCause(base)
	h.leases[le] = struct{}{}
	return le
}

// extended records a successful refresh sent at sent for ttl. It returns
// false, changing nothing but the next renewal, if the driver reported
// doubt after the refresh was sent: its success proves nothing since.
func (l *Locker) extended(h *hold, sent time.Time, ttl time.Duration) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	if h.state != holdHeld {
		return true
	}
	if h.doubt != nil && !sent.After(h.doubtAt) {
		h.nextRenew = l.recheckAt(h, sent)
		l.wd.reschedule(h)
		return false
	}
	if ttl > h.ttl && l.caps.PerLockTTL {
		h.ttl = ttl
	}
	if !l.caps.PerLockTTL {
		ttl = h.ttl
	}
	if d := sent.Add(ttl - l.cfg.drift(ttl)); d.After(h.deadline) {
		h.deadline = d
	}
	h.nextRenew = sent.Add(h.ttl / 3)
	if h.doubt != nil {
		l.cfg.logger.Info("distlock: lease confirmed again", "key", h.key)
	}
	h.doubt, h.checking = nil, false
	l.wd.reschedule(h)
	return true
}

// refreshFailed records a failed refresh: the store said the lock is gone
// (lost now), or could not be asked (in doubt until the deadline).
func (l *Locker) refreshFailed(h *hold, err error) {
	if errors.Is(err, ErrNotHeld) {
		l.lose(h, err)
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if h.state == holdHeld {
		l.failedLocked(h, err)
	}
}

// failedLocked puts h in doubt after a refresh that could not reach the
// store. A doubt the driver pushed keeps its cause (the refreshes fail
// because of it); otherwise the latest error is the cause. Locker.mu is
// held.
func (l *Locker) failedLocked(h *hold, err error) {
	switch {
	case h.doubt == nil:
		h.doubtAt = time.Time{} // in doubt by a failed refresh, not a push
		h.doubt = err
	case h.doubtAt.IsZero():
		h.doubt = err
	}
}

// driverDoubt is the OnDoubt callback given to drivers: the lease is in
// doubt at once, its validity ends no later than until (minus the drift
// margin), and it is checked again soon.
func (l *Locker) driverDoubt(h *hold, cause error, until time.Time) {
	now := time.Now()
	l.mu.Lock()
	defer l.mu.Unlock()
	if h.state == holdEnded {
		return
	}
	if cause == nil {
		cause = errors.New("driver lost contact with the store")
	}
	h.doubt = fmt.Errorf("store out of contact: %w", cause)
	h.doubtAt = now
	if h.state == holdPending {
		if h.doubtUntil.IsZero() {
			h.doubtUntil = until
		} else if !until.IsZero() {
			h.doubtUntil = earliest(h.doubtUntil, until)
		}
		return
	}
	l.cfg.logger.Info("distlock: store out of contact; lease in doubt", "key", h.key, "cause", cause, "until", until)
	if !until.IsZero() {
		h.deadline = earliest(h.deadline, until.Add(-l.cfg.drift(h.ttl)))
	}
	h.checking = l.mayRecheck(h)
	h.nextRenew = earliest(h.nextRenew, l.recheckAt(h, now))
	if h.renewing {
		// Off the heap until its renewal returns: end it at its deadline
		// even if the renewal hangs until then.
		h.stopExpiry()
		h.expiry = time.AfterFunc(time.Until(h.deadline), func() { l.expire(h) })
		return
	}
	l.wd.reschedule(h)
}

// driverRestored is the OnRestored callback given to drivers: a lease in
// doubt is checked again at once.
func (l *Locker) driverRestored(h *hold) {
	now := time.Now()
	l.mu.Lock()
	defer l.mu.Unlock()
	h.restoredAt = now
	if h.state != holdHeld || h.doubt == nil || !l.mayRecheck(h) {
		return
	}
	h.nextRenew = now
	l.wd.reschedule(h)
}

// mayRecheck reports whether the watchdog may Refresh h on its own while
// it is in doubt: always if it auto-renews; otherwise only where a Refresh
// confirms without extending (a refresh would lengthen a lease the user
// asked not to renew).
func (l *Locker) mayRecheck(h *hold) bool { return h.autoRenew || !l.caps.PerLockTTL }

// recheckAt returns when a hold in doubt is checked next, after a check
// sent at sent failed or proved nothing: at once if the driver reported
// contact restored since, else after a short jittered retry interval.
// Holds the watchdog may not refresh keep their schedule. Locker.mu is held.
func (l *Locker) recheckAt(h *hold, sent time.Time) time.Time {
	now := time.Now()
	switch {
	case !l.mayRecheck(h):
		return h.nextRenew
	case h.restoredAt.After(sent) && h.restoredAt.After(h.doubtAt):
		return now
	}
	return now.Add(retryInterval(h.ttl))
}

// stopExpiry stops h's expiry timer, if any: h is back on the watchdog's
// heap, or ended. Locker.mu is held.
func (h *hold) stopExpiry() {
	if h.expiry != nil {
		h.expiry.Stop()
		h.expiry = nil
	}
}

// expire ends h if its validity has run out (for holds off the watchdog's
// heap while a renewal is in flight).
func (l *Locker) expire(h *hold) {
	l.mu.Lock()
	if h.state != holdHeld || time.Now().Before(h.deadline) {
		l.mu.Unlock()
		return
	}
	cause := errors.New("validity ran out: not confirmed in time")
	if h.doubt != nil {
		cause = fmt.Errorf("validity ran out while in doubt: %w", h.doubt)
	}
	l.mu.Unlock()
	l.lose(h, cause)
}

func earliest(a, b time.Time) time.Time {
	if b.Before(a) {
		return b
	}
	return a
}

// driverLost is the OnLost callback given to drivers.
func (l *Locker) driverLost(h *hold, err error) {
	l.mu.Lock()
	if h.state == holdPending {
		h.early = fmt.Errorf("%w: %w", ErrLost, err)
		l.mu.Unlock()
		return
	}
	l.mu.Unlock()
	l.lose(h, err)
}

// lose ends h because of cause, cancels its Leases, and frees the lock in
// the store in the background (best effort: it may already be gone), so a
// lease the client gave up on is never left locked.
func (l *Locker) lose(h *hold, cause error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if h.state != holdHeld {
		return
	}
	l.endLocked(h, &lostError{key: h.key, cause: cause})
	l.cfg.logger.Warn("distlock: lease lost", "key", h.key, "cause", cause)
	if !errors.Is(cause, ErrNotHeld) {
		lock := h.grant.Lock
		l.goBackground(func() { l.releaseQuietly(lock) })
	}
}

// endLocked marks h ended and cancels its Leases with cause. Locker.mu is held.
func (l *Locker) endLocked(h *hold, cause error) {
	h.state = holdEnded
	delete(l.holds, holdKey{h.key, h.owner})
	l.wd.remove(h)
	h.stopExpiry()
	for le := range h.leases {
		le.cancel(cause)
	}
	clear(h.leases)
}

// endHold releases h in the store and ends its Leases with cause.
func (l *Locker) endHold(ctx context.Context, h *hold, cause error) error {
	l.mu.Lock()
	if h.state != holdHeld {
		l.mu.Unlock()
		return nil
	}
	l.endLocked(h, cause)
	lock := h.grant.Lock
	l.mu.Unlock()
	if err := lock.Release(ctx); err != nil {
		return fmt.Errorf("distlock: release %q: %w", h.key, err)
	}
	return nil
}

func (l *Locker) releaseQuietly(lock backend.Lock) {
	ctx, cancel := context.WithTimeout(context.Background(), l.cfg.releaseTimeout)
	defer cancel()
	_ = lock.Release(ctx)
}
