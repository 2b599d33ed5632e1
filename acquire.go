package distlock

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/distlock/distlock/backend"
	"go.opentelemetry.io/otel/trace"
)

// One acquisition, from the API's call to a Lease: the options and the
// TTL checked, the owner chosen, the hold claimed (hold.go: a re-entry
// ends there), the grant obtained from the store (wait.go), and the
// grant recorded (settle): the hold's deadline, its renewal scheduled
// (watchdog.go), a doubt pushed meanwhile applied (doubt.go), the change
// reported (observe.go). Every primitive comes through here: the mutex,
// a read-write lock's sides (acquireMode), the semaphore's permits
// (semaphore.go builds its own request and settles here), the
// multi-lock's keys (multistep.go settles each).

// acquire is Acquire (wait) and TryAcquire, measured and traced.
func (l *Locker) acquire(ctx context.Context, key string, opts []Option, wait bool) (*Lease, error) {
	return l.acquirePrim(ctx, key, opts, wait, primMutex)
}

// acquirePrim is acquire of the mutex of key for prim (a mutex, an
// election's lock, a key of AcquireAll), as telemetry names it.
func (l *Locker) acquirePrim(ctx context.Context, key string, opts []Option, wait bool, prim primitive) (*Lease, error) {
	actx, op := l.tel.startAcquire(ctx, key, wait, prim)
	le, err := l.acquireAs(actx, key, opts, wait, op.tag())
	op.end(ctx, le, err)
	return le, err
}

// acquireAs acquires key; label is its WithKeyAttribute label.
func (l *Locker) acquireAs(ctx context.Context, key string, opts []Option, wait bool, tag holdTag) (*Lease, error) {
	return l.acquireMode(ctx, key, opts, wait, tag, backend.Exclusive)
}

// acquireMode acquires key's mutex (mode Exclusive) or a side of its
// read-write lock.
func (l *Locker) acquireMode(ctx context.Context, key string, opts []Option, wait bool, tag holdTag, mode backend.Kind) (*Lease, error) {
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

	h, le, err := l.claim(ctx, holdKey{key, owner, mode}, ttl, c, tag)
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

// maxTTL is the longest TTL the Locker asks its driver for: the store's
// MaxTTL, never above backend.TTLLimit.
func (l *Locker) maxTTL() time.Duration {
	if l.caps.MaxTTL > 0 && l.caps.MaxTTL < backend.TTLLimit {
		return l.caps.MaxTTL
	}
	return backend.TTLLimit
}

func (l *Locker) checkMaxTTL(ttl time.Duration) error {
	if ttl > l.maxTTL() {
		return fmt.Errorf("%w: TTL %v is above the %s backend's maximum of %v", ErrInvalidConfig, ttl, l.caps.Name, l.maxTTL())
	}
	return nil
}

// ttlFor returns the TTL to request.
func (l *Locker) ttlFor(c acquireConfig) (time.Duration, error) {
	ttl := c.ttl
	if ttl == 0 {
		ttl = l.cfg.ttl
	}
	if err := l.checkTTL(ttl); err != nil {
		return 0, err
	}
	return ttl, nil
}

// checkTTLBounds reports whether the store can honour ttl: not negative,
// within its MinTTL and MaxTTL.
func (l *Locker) checkTTLBounds(ttl time.Duration) error {
	if ttl < 0 {
		return fmt.Errorf("%w: TTL %v is negative", ErrInvalidConfig, ttl)
	}
	if ttl < l.caps.MinTTL {
		return fmt.Errorf("%w: TTL %v is below the %s backend's minimum of %v", ErrInvalidConfig, ttl, l.caps.Name, l.caps.MinTTL)
	}
	return l.checkMaxTTL(ttl)
}

// checkTTL reports whether the store can honour ttl, and the drift margin
// leaves it a validity.
func (l *Locker) checkTTL(ttl time.Duration) error {
	if err := l.checkTTLBounds(ttl); err != nil {
		return err
	}
	if l.cfg.drift(ttl) >= ttl/2 {
		return fmt.Errorf("%w: TTL %v leaves no validity after the clock-drift margin %v", ErrInvalidConfig, ttl, l.cfg.drift(ttl))
	}
	return nil
}
