package distlock

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/distlock/distlock/backend"
)

// Waiting bounds. Polling starts fast, because most locks are held briefly,
// and backs off to pollMax; a notified waiter also re-checks at least every
// notifyMax in case a wake-up was lost and the holder's TTL is unknown.
const (
	pollMin   = 5 * time.Millisecond
	pollMax   = 250 * time.Millisecond
	outageMax = time.Second
	notifyMax = 5 * time.Second
)

// obtain gets a grant from the driver: one attempt, the driver's own queue,
// or a retry loop woken by store notifications or backoff.
func (l *Locker) obtain(ctx context.Context, req backend.Request, wait bool) (backend.Grant, error) {
	return l.obtainWith(ctx, storeOps{key: req.Key, ttl: req.TTL, lock: req, isLock: true}, wait)
}

// storeOps are the store calls a wait is made of, for a lock or for a
// semaphore's permits (semaphore.go).
type storeOps struct {
	key string
	ttl time.Duration // the TTL asked for, which a grant's validity counts when it names none
	// With isLock, lock is a lock's request, taken through the driver's
	// own methods (TryAcquire, Wait, Subscribe): the funcs below are then
	// unused, and an acquisition makes no closures for them. (A value,
	// not a pointer: a pointer would move the request to the heap.)
	lock      backend.Request
	isLock    bool
	try       func(context.Context) (backend.Grant, error)
	wait      func(context.Context) (backend.Grant, error)                   // the store's queue; nil if none
	subscribe func(context.Context, string) (<-chan struct{}, func(), error) // release announcements; nil if none
	// retry, if set, is the attempt of a retry loop (try is the single
	// attempt without waiting): a read-write lock's writer marks itself
	// waiting with it.
	retry func(context.Context) (backend.Grant, error)
	// maxDelay, if positive, caps each sleep of a retry loop (a waiting
	// writer's mark must be renewed within its TTL).
	maxDelay time.Duration
}

// obtainWith gets a grant through ops: one attempt, the store's queue, or
// a retry loop woken by store notifications or backoff.
func (l *Locker) obtainWith(ctx context.Context, ops storeOps, wait bool) (backend.Grant, error) {
	started := time.Now()
	var g backend.Grant
	var err error
	if wait {
		l.tel.m.waiters.Add(ctx, 1, l.tel.base.add...)
		defer l.tel.m.waiters.Add(ctx, -1, l.tel.base.add...)
	}
	switch {
	case !wait:
		g, err = l.try(ctx, &ops, false)
		if err == nil {
			g, err = l.valid(g, ops.ttl, started)
		}
		err = unanswered(ctx, err)
		l.tel.storeError(ctx, "acquire", err)
	case l.queues(&ops):
		g, err = l.queueWait(ctx, &ops, started)
	default:
		g, err = l.retryWait(ctx, &ops)
	}
	return g, err
}

// valid returns g with its ValidFrom filled in (sent, when the driver
// named none), or, if g's validity has already run out, gives its lock
// back (in the background) and returns an error matching ErrUnavailable:
// the store's answer came too late to be a lease, as the store may have
// handed the lock to someone else by now (a reply slower than the TTL, or
// a queue's grant counted from a session last confirmed longer ago). ttl
// is the TTL asked for. A wait then tries again, as after an outage.
func (l *Locker) valid(g backend.Grant, ttl time.Duration, sent time.Time) (backend.Grant, error) {
	if g.ValidFrom.IsZero() {
		g.ValidFrom = sent
	}
	end := validUntil(g, ttl, l.cfg.drift)
	if late := time.Since(end); late < 0 {
		return g, nil
	} else if lock := g.Lock; lock != nil {
		l.goCall(func() { l.releaseQuietly(lock) })
		return backend.Grant{}, fmt.Errorf("%w: the grant arrived %v after its validity ran out (counted from %s)", ErrUnavailable, late.Round(time.Millisecond), g.ValidFrom.Format(time.RFC3339Nano))
	}
	return backend.Grant{}, fmt.Errorf("%w: the grant arrived after its validity ran out", ErrUnavailable)
}

// validUntil is the end of a grant's client-side validity: from its
// ValidFrom, the life the store applied (g.TTL, else the TTL asked for)
// less the drift margin.
func validUntil(g backend.Grant, ttl time.Duration, drift func(time.Duration) time.Duration) time.Time {
	life := ttl
	if g.TTL > 0 {
		life = g.TTL
	}
	return g.ValidFrom.Add(life - drift(life))
}

// unanswered marks a single attempt that ended with its ctx's deadline,
// before the store gave any answer, as ErrUnavailable too: the store did
// not answer in the time the caller allowed. The deadline stays matchable;
// a ctx the caller canceled is not unavailability.
func unanswered(ctx context.Context, err error) error {
	if err == nil || errors.Is(err, ErrUnavailable) || errors.Is(err, ErrNotAcquired) || errors.Is(err, ErrInvalidConfig) {
		return err
	}
	if errors.Is(err, context.DeadlineExceeded) && errors.Is(ctx.Err(), context.DeadlineExceeded) {
		return fmt.Errorf("%w: no answer within the ctx: %w", ErrUnavailable, err)
	}
	return err
}

// try makes one attempt through ops (the retry loop's attempt if
// retrying).
func (l *Locker) try(ctx context.Context, ops *storeOps, retrying bool) (backend.Grant, error) {
	switch {
	case ops.isLock:
		return l.d.TryAcquire(ctx, ops.lock)
	case retrying && ops.retry != nil:
		return ops.retry(ctx)
	}
	return ops.try(ctx)
}

// queues reports whether ops wait in the store's queue.
func (l *Locker) queues(ops *storeOps) bool {
	if ops.isLock {
		return l.waiter != nil
	}
	return ops.wait != nil
}

// subscribes reports whether the store announces the releases ops wait
// for.
func (l *Locker) subscribes(ops *storeOps) bool {
	if ops.isLock {
		return l.notifier != nil
	}
	return ops.subscribe != nil
}

// subscribe subscribes to the releases ops wait for.
func (l *Locker) subscribe(ctx context.Context, ops *storeOps) (<-chan struct{}, func(), error) {
	if ops.isLock {
		return l.notifier.Subscribe(ctx, ops.key)
	}
	return ops.subscribe(ctx, ops.key)
}

// queueWait lets the driver wait in its store's queue, retrying the whole
// wait (after backoff) if the store became unreachable.
func (l *Locker) queueWait(ctx context.Context, ops *storeOps, started time.Time) (backend.Grant, error) {
	var bo backoff
	for {
		var g backend.Grant
		var err error
		if ops.isLock {
			g, err = l.waiter.Wait(ctx, ops.lock)
		} else {
			g, err = ops.wait(ctx)
		}
		if err == nil {
			g, err = l.valid(g, ops.ttl, started)
		}
		l.tel.storeError(ctx, "wait", err)
		if err == nil || !errors.Is(err, ErrUnavailable) || permanent(err) || ctx.Err() != nil {
			return g, waitErr(ctx, err, nil)
		}
		if serr := sleep(ctx, bo.next(pollMin, outageMax), nil); serr != nil {
			return g, waitErr(ctx, serr, err)
		}
	}
}

// retryWait retries TryAcquire until it succeeds, subscribing first to
// release announcements where the driver offers them.
func (l *Locker) retryWait(ctx context.Context, ops *storeOps) (backend.Grant, error) {
	var wake <-chan struct{}
	var bo backoff
	var lastErr error
	unsubscribe := func() {}
	defer func() { unsubscribe() }()
	for {
		sent := time.Now()
		g, err := l.try(ctx, ops, true)
		if err == nil {
			g, err = l.valid(g, ops.ttl, sent)
		}
		l.tel.storeError(ctx, "acquire", err)
		if err == nil {
			return g, nil
		}
		if ctx.Err() != nil {
			return g, waitErr(ctx, err, lastErr)
		}
		var delay time.Duration
		switch {
		case permanent(err):
			return g, err
		case errors.Is(err, ErrNotAcquired):
			if wake == nil && l.subscribes(ops) {
				w, cancel, serr := l.subscribe(ctx, ops)
				if serr == nil {
					wake, unsubscribe = w, cancel
					continue // re-check: a release before the subscription is not announced
				}
				l.tel.storeError(ctx, "subscribe", serr)
				lastErr = serr // fall back to polling
			}
			delay = l.waitDelay(&bo, backend.RetryAfter(err), wake != nil)
		case errors.Is(err, ErrUnavailable):
			lastErr = err
			delay = bo.next(pollMin, outageMax)
		default:
			return g, err
		}
		if ops.maxDelay > 0 {
			delay = min(delay, ops.maxDelay)
		}
		if err := sleep(ctx, delay, wake); err != nil {
			return g, waitErr(ctx, err, lastErr)
		}
	}
}

// permanent reports whether err is one no retry fixes (a refused login or
// ACL, a bad key, an unsupported request): a wait ends at once with it,
// even if it matches ErrUnavailable too (a Redlock whose nodes failed in
// different ways).
func permanent(err error) bool {
	return errors.Is(err, ErrInvalidConfig) || errors.Is(err, ErrInvalidKey) || errors.Is(err, ErrUnsupported)
}

// waitDelay is how long a waiter sleeps after finding the lock held. A
// notified waiter sleeps until the holder's TTL runs out (it is woken
// earlier by a release); a polling one backs off, never past that TTL.
func (l *Locker) waitDelay(bo *backoff, holderTTL time.Duration, notified bool) time.Duration {
	if notified {
		if holderTTL <= 0 || holderTTL > notifyMax {
			holderTTL = notifyMax
		}
		return holderTTL + rand.N(pollMin)
	}
	d := bo.next(pollMin, pollMax)
	if holderTTL > 0 && holderTTL < d {
		d = holderTTL + rand.N(pollMin)
	}
	return d
}

// backoff is jittered exponential backoff: each delay is drawn from the
// upper half of a range that doubles up to a cap.
type backoff struct{ cur time.Duration }

func (b *backoff) next(lo, hi time.Duration) time.Duration {
	if b.cur < lo {
		b.cur = lo
	} else {
		b.cur = min(b.cur*2, hi)
	}
	return b.cur/2 + rand.N(b.cur/2+1)
}

// sleep waits for d, a wake-up, or the end of ctx.
func sleep(ctx context.Context, d time.Duration, wake <-chan struct{}) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-wake:
		return nil
	case <-ctx.Done():
		return context.Cause(ctx)
	}
}

// waitErr explains a failed wait: the ctx's cause, and the store's last
// error if it was unreachable meanwhile.
func waitErr(ctx context.Context, err, lastStoreErr error) error {
	if err == nil {
		return nil
	}
	if ctx.Err() == nil {
		return err
	}
	cause := context.Cause(ctx)
	if lastStoreErr != nil {
		return fmt.Errorf("%w (while waiting: %w)", cause, lastStoreErr)
	}
	if errors.Is(err, cause) {
		return err
	}
	return fmt.Errorf("%w (%w)", cause, err)
}
