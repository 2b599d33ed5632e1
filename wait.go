package distlock

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/distlock/distlock/backend"
	"github.com/distlock/distlock/internal/backoff"
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

// obtain gets a grant of req, of any kind, from the driver: one attempt,
// the driver's own queue, or a retry loop woken by the store's release
// announcements or backoff, as the driver declares for req.Kind
// (Capabilities.WaitFor). A wait for the write side of a read-write lock
// that ends without a grant withdraws its waiting mark, so a writer that
// gave up keeps no reader out. h is the pending hold the grant is for: a
// doubt the driver pushed while it was pending may end a grant's validity
// sooner (grantEnd).
func (l *Locker) obtain(ctx context.Context, h *hold, req backend.Request, wait bool) (backend.Grant, error) {
	started := time.Now()
	var g backend.Grant
	var err error
	if wait {
		l.tel.m.waiters.Add(ctx, 1, l.tel.base.add...)
		defer l.tel.m.waiters.Add(ctx, -1, l.tel.base.add...)
	}
	switch {
	case !wait:
		g, err = l.d.TryAcquire(ctx, req)
		if err == nil {
			g, err = l.valid(h, g, req.TTL, started)
		}
		err = unanswered(ctx, err)
		l.tel.storeError(ctx, "acquire", err)
	case l.waiter != nil && l.caps.WaitFor(req.Kind) == backend.WaitQueue:
		g, err = l.queueWait(ctx, h, req, started)
	default:
		g, err = l.retryWait(ctx, h, req)
		if err != nil && req.Kind == backend.Write && l.notifier != nil {
			l.withdraw(ctx, req)
		}
	}
	return g, err
}

// withdraw removes a writer's waiting mark after a wait that failed,
// with its own timeout (the wait's ctx has usually ended). If the store
// cannot be reached the mark expires by the writer's TTL.
func (l *Locker) withdraw(ctx context.Context, req backend.Request) {
	wctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), l.cfg.releaseTimeout)
	defer cancel()
	l.tel.storeError(wctx, "withdraw", l.notifier.Withdraw(wctx, req))
}

// valid returns g with its ValidFrom filled in (sent, when the driver
// named none), or, if g's validity has already run out, gives its lock
// back (in the background) and returns an error matching ErrUnavailable:
// the store's answer came too late to be a lease, as the store may have
// handed the lock to someone else by now (a reply slower than the TTL, or
// a queue's grant counted from a session last confirmed longer ago). ttl
// is the TTL asked for, h the pending hold (grantEnd). A wait then tries
// again, as after an outage.
func (l *Locker) valid(h *hold, g backend.Grant, ttl time.Duration, sent time.Time) (backend.Grant, error) {
	if g.ValidFrom.IsZero() {
		g.ValidFrom = sent
	}
	l.mu.Lock()
	end := l.grantEnd(h, g, grantLife(g, ttl))
	l.mu.Unlock()
	if late := time.Since(end); late < 0 {
		return g, nil
	} else if lock := g.Lock; lock != nil {
		l.goCall(func() { l.releaseQuietly(lock) })
		return backend.Grant{}, fmt.Errorf("%w: the grant arrived %v after its validity ran out (counted from %s)", ErrUnavailable, late.Round(time.Millisecond), g.ValidFrom.Format(time.RFC3339Nano))
	}
	return backend.Grant{}, fmt.Errorf("%w: the grant arrived after its validity ran out", ErrUnavailable)
}

// grantLife is the life the store applied to g: g.TTL, else the TTL
// asked for.
func grantLife(g backend.Grant, ttl time.Duration) time.Duration {
	if g.TTL > 0 {
		return g.TTL
	}
	return ttl
}

// grantEnd is the end of a grant's client-side validity, for the pending
// hold h (nil if none): from its ValidFrom, the life the store applied
// less the drift margin; and no later than the end of a doubt the driver
// pushed while h was pending, unless the grant was confirmed after that
// doubt began (doubtAtGrant applies the same rule to the hold). Locker.mu
// is held.
func (l *Locker) grantEnd(h *hold, g backend.Grant, life time.Duration) time.Time {
	end := g.ValidFrom.Add(life - l.cfg.drift(life))
	if h != nil && h.doubt.cause != nil && !h.doubt.until.IsZero() && !g.ValidFrom.After(h.doubt.at) {
		end = earliest(end, h.doubt.until.Add(-l.cfg.drift(life)))
	}
	return end
}

// unanswered marks a single attempt that ended with its ctx's deadline,
// before the store gave any answer, as ErrUnavailable too: the store did
// not answer in the time the caller allowed. The deadline stays matchable;
// a ctx the caller canceled is not unavailability: an attempt that failed
// as unavailable once its ctx was canceled (a client that does not end a
// read at a cancel returns its read timeout, another the cancel in its own
// error kind) ends with the ctx's cause, the store's error kept as text
// (conformance ErrorTable, part canceled-in-flight).
func unanswered(ctx context.Context, err error) error {
	if err != nil && errors.Is(err, ErrUnavailable) && !permanent(err) && errors.Is(ctx.Err(), context.Canceled) {
		return fmt.Errorf("%w (the attempt was in flight: %v)", context.Cause(ctx), err)
	}
	if err == nil || errors.Is(err, ErrUnavailable) || errors.Is(err, ErrNotAcquired) || errors.Is(err, ErrInvalidConfig) {
		return err
	}
	if errors.Is(err, context.DeadlineExceeded) && errors.Is(ctx.Err(), context.DeadlineExceeded) {
		return fmt.Errorf("%w: no answer within the ctx: %w", ErrUnavailable, err)
	}
	return err
}

// queueWait lets the driver wait in its store's queue, retrying the whole
// wait (after backoff) if the store became unreachable.
func (l *Locker) queueWait(ctx context.Context, h *hold, req backend.Request, started time.Time) (backend.Grant, error) {
	var bo backoff.Backoff
	for {
		g, err := l.waiter.Wait(ctx, req)
		if err == nil {
			g, err = l.valid(h, g, req.TTL, started)
		}
		l.tel.storeError(ctx, "wait", err)
		if err == nil || !errors.Is(err, ErrUnavailable) || permanent(err) || ctx.Err() != nil {
			return g, waitErr(ctx, err, nil)
		}
		if serr := sleep(ctx, bo.Next(pollMin, outageMax), nil); serr != nil {
			return g, waitErr(ctx, serr, err)
		}
	}
}

// retryWait retries TryAcquire until it succeeds, subscribing first to
// release announcements where the driver offers them for req.Kind. A
// writer's attempts are marked waiting (Request.Waiting) and made at least
// every third of its TTL, which keeps its waiting mark alive (the store
// drops a mark not renewed within the TTL).
func (l *Locker) retryWait(ctx context.Context, h *hold, req backend.Request) (backend.Grant, error) {
	req.Waiting = req.Kind == backend.Write
	notifies := l.notifier != nil && l.caps.WaitFor(req.Kind) == backend.WaitNotify
	var wake <-chan struct{}
	var bo backoff.Backoff
	var lastErr error
	unsubscribe := func() {}
	defer func() { unsubscribe() }()
	for {
		sent := time.Now()
		g, err := l.d.TryAcquire(ctx, req)
		if err == nil {
			g, err = l.valid(h, g, req.TTL, sent)
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
			if wake == nil && notifies {
				w, cancel, serr := l.notifier.Subscribe(ctx, req.Key, req.Kind)
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
			delay = bo.Next(pollMin, outageMax)
		default:
			return g, err
		}
		if req.Waiting {
			delay = min(delay, req.TTL/3)
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
func (l *Locker) waitDelay(bo *backoff.Backoff, holderTTL time.Duration, notified bool) time.Duration {
	if notified {
		if holderTTL <= 0 || holderTTL > notifyMax {
			holderTTL = notifyMax
		}
		return holderTTL + rand.N(pollMin)
	}
	d := bo.Next(pollMin, pollMax)
	if holderTTL > 0 && holderTTL < d {
		d = holderTTL + rand.N(pollMin)
	}
	return d
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
