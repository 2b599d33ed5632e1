package distlock

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/distlock/distlock/backend"
	"github.com/distlock/distlock/internal/backoff"
)

// A lease is in doubt while the portable layer cannot tell whether the
// store still holds its lock: a renewal failed, or the driver reported
// lost contact (backend.Request.OnDoubt). It stays valid until its
// deadline, is checked again with Refresh, and is held again once a
// Refresh sent after the last doubt succeeds; it is lost when the store
// says the lock is gone, the driver reports the loss (OnLost), or the
// deadline passes first.

// doubtState is a hold's doubt. Guarded by Locker.mu.
type doubtState struct {
	cause error // last renewal error or pushed doubt, while still inside validity; nil: not in doubt

	// Doubt pushed by the driver (backend.Request.OnDoubt): a refresh sent
	// before at proves nothing about the store after it. Zero: in doubt
	// by a failed refresh.
	at         time.Time
	until      time.Time // the driver's until, kept for a pending hold
	restoredAt time.Time // the driver's last OnRestored
	checking   bool      // in doubt: the watchdog refreshes it even without auto-renewal
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

// extended records a successful refresh sent at sent for ttl. It returns
// false, changing nothing but the next renewal, if the driver reported
// doubt after the refresh was sent: its success proves nothing since.
func (l *Locker) extended(h *hold, sent time.Time, ttl time.Duration) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.extendedLocked(h, sent, ttl)
}

// extendedLocked is extended with Locker.mu held. A success that comes
// after h's validity ran out changes nothing: h is lost then, as the
// watchdog (perhaps not yet scheduled) would have ended it at its
// deadline.
func (l *Locker) extendedLocked(h *hold, sent time.Time, ttl time.Duration) bool {
	if h.state != holdHeld {
		return true
	}
	if !time.Now().Before(h.deadline) {
		l.loseLocked(h, h.doubt.ranOut("renewed"))
		return true
	}
	if h.doubt.cause != nil && !sent.After(h.doubt.at) {
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
	if h.doubt.cause != nil {
		l.changed(h, EventRestored, nil)
	}
	h.doubt.cause, h.doubt.checking = nil, false
	l.wd.reschedule(h)
	return true
}

// refreshFailed records a failed refresh: the store said the lock is gone
// (lost now), or could not be asked or did not answer in time (in doubt
// until the deadline). An answer after the deadline changes nothing.
func (l *Locker) refreshFailed(h *hold, err error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	switch {
	case h.state != holdHeld:
	case !time.Now().Before(h.deadline):
		l.loseLocked(h, h.doubt.ranOut("renewed"))
	case errors.Is(err, ErrNotHeld):
		l.loseLocked(h, err)
	default:
		l.failedLocked(h, err)
	}
}

// failedLocked puts h in doubt after a refresh that could not reach the
// store (or went unanswered). A doubt the driver pushed keeps its cause
// (the refreshes fail because of it); otherwise the latest error is the
// cause. Locker.mu is held.
func (l *Locker) failedLocked(h *hold, err error) {
	switch {
	case h.doubt.cause == nil:
		h.doubt.at = time.Time{} // in doubt by a failed refresh, not a push
		h.doubt.cause = err
		l.changed(h, EventInDoubt, err)
	case h.doubt.at.IsZero():
		h.doubt.cause = err
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
	first := h.doubt.cause == nil
	h.doubt.cause = fmt.Errorf("store out of contact: %w", cause)
	h.doubt.at = now
	if h.state == holdPending {
		if h.doubt.until.IsZero() {
			h.doubt.until = until
		} else if !until.IsZero() {
			h.doubt.until = earliest(h.doubt.until, until)
		}
		return
	}
	if !until.IsZero() {
		h.deadline = earliest(h.deadline, until.Add(-l.cfg.drift(h.ttl)))
	}
	if first {
		l.changed(h, EventInDoubt, h.doubt.cause)
	}
	h.doubt.checking = l.mayRecheck(h)
	h.nextRenew = earliest(h.nextRenew, l.recheckAt(h, now))
	l.wd.reschedule(h) // a hold whose renewal is in flight is watched for its (new) deadline

}

// driverRestored is the OnRestored callback given to drivers: a lease in
// doubt is checked again at once.
func (l *Locker) driverRestored(h *hold) {
	now := time.Now()
	l.mu.Lock()
	defer l.mu.Unlock()
	h.doubt.restoredAt = now
	if h.state != holdHeld || h.doubt.cause == nil || !l.mayRecheck(h) {
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
	case h.doubt.restoredAt.After(sent) && h.doubt.restoredAt.After(h.doubt.at):
		return now
	}
	return now.Add(retryInterval(h.ttl))
}

// doubtAtGrant applies a doubt the driver pushed while h was pending to
// its grant g (a store life of life): none if the grant was confirmed
// after it, else h starts in doubt. Locker.mu is held.
func (l *Locker) doubtAtGrant(h *hold, g backend.Grant, life time.Duration) {
	switch {
	case h.doubt.cause == nil:
	case g.ValidFrom.After(h.doubt.at):
		h.doubt.cause = nil // the grant itself was confirmed after that
	default:
		if !h.doubt.until.IsZero() {
			h.deadline = earliest(h.deadline, h.doubt.until.Add(-l.cfg.drift(life)))
		}
		h.doubt.checking = l.mayRecheck(h)
		h.nextRenew = l.recheckAt(h, time.Now())
		l.changed(h, EventInDoubt, h.doubt.cause)
	}
}

// retryInterval is how soon a failed renewal is retried: a tenth of the TTL,
// at most a second, jittered so many Lockers do not retry in step.
func retryInterval(ttl time.Duration) time.Duration {
	return backoff.Jitter(min(ttl/10, time.Second))
}
