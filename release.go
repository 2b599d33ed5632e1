package distlock

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/distlock/distlock/backend"
)

// Ending a hold: its Leases are canceled with the cause, and its lock is
// released in the store once (a lost hold's too, in the background, so
// that the driver frees what it kept for it). Until the store answers, the
// hold stays registered, ended, and an acquisition by the same owner
// waits for it.

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
	if ctx.Done() == nil || l.cfg.releaseInline || l.bounded {
		// A ctx that cannot end, WithReleaseOnCaller, or a driver that
		// returns by its ctx's end itself (backend.Capabilities.CtxBounded): no
		// goroutine, no closures.
		err = lock.Release(ctx)
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

// end ends the lease with cause, unless it already ended. Locker.mu is
// held.
func (le *Lease) end(cause error) {
	if le.cause != nil {
		return
	}
	le.cause = cause
	if le.cancel != nil {
		le.cancel(cause)
	}
}
