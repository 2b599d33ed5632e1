package distlock

import (
	"errors"
	"fmt"
	"time"
)

// Loss: a hold ends without Release when its validity runs out
// (endIfPastDeadline, or the watchdog at the deadline), when the store
// says the lock is gone, or when the driver reports it (OnLost). Its
// Leases end with a cause matching ErrLost, and the lock is released in
// the background (release.go).

// endIfPastDeadline ends h as lost if its validity has run out and the
// watchdog has not ended it yet (its goroutine may not have run), so that
// Err and State never report a lease held past its deadline. It reports
// whether h has ended.
func (l *Locker) endIfPastDeadline(h *hold) bool {
	l.mu.Lock()
	switch {
	case h.state == holdEnded:
		l.mu.Unlock()
		return true
	case h.state != holdHeld || time.Now().Before(h.deadline):
		l.mu.Unlock()
		return false
	}
	cause := h.doubt.ranOut("renewed")
	l.mu.Unlock()
	l.lose(h, cause)
	return true
}

func earliest(a, b time.Time) time.Time {
	if b.Before(a) {
		return b
	}
	return a
}

// driverLost is the OnLost callback given to drivers. The first call
// counts; later ones, and calls for a hold that has ended, do nothing.
func (l *Locker) driverLost(h *hold, err error) {
	l.mu.Lock()
	if h.state == holdPending {
		if h.early == nil {
			h.early = fmt.Errorf("%w: %w", ErrLost, err)
		}
		l.mu.Unlock()
		return
	}
	l.mu.Unlock()
	l.lose(h, err)
}

// lose ends h because of cause, cancels its Leases, and releases the lock
// in the background: a lease the client gave up on is never left locked,
// and a lock the store no longer has is released too (the driver then
// answers ErrNotHeld and frees what it kept for it), so every Grant is
// released exactly once.
func (l *Locker) lose(h *hold, cause error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.loseLocked(h, cause)
}

// loseLocked is lose with Locker.mu held.
func (l *Locker) loseLocked(h *hold, cause error) {
	if h.state != holdHeld {
		return
	}
	var expired *expiredError
	if l.closed && !errors.As(cause, &expired) {
		// Close has begun and ends this hold as it ends every other
		// (released, not lost). A loss reported now is most likely Close's
		// own doing: it canceled the lock's renewal, and the driver gave
		// the lock up with it, reporting the cancellation (context.Canceled)
		// or only its effect (an SQL connection closed under the abandoned
		// statement: "bad connection"). Close's release of a lock that is
		// really gone fails with ErrNotHeld, which Close ignores: the
		// caller is done with the lease either way.
		//
		// A validity that ran out is no such report: Close renews nothing,
		// and a lease it has not released yet when its deadline passes is
		// lost (the store may give the lock to someone else), so it is
		// ended here as it would be without Close. Close has not released
		// it, so it has not yet waited for the background release below.
		return
	}
	lost := &lostError{key: h.key, cause: cause}
	l.endLocked(h, lost)
	delete(l.holds, h.hk())
	l.changed(h, EventLost, lost)
	lock := h.grant.Lock
	l.goCall(func() { l.releaseQuietly(lock) })
}

// ranOut is the cause of a loss at the deadline: the doubt if any, else
// that the lease was not confirmed (or renewed) in time.
func (d *doubtState) ranOut(notWhat string) error {
	if d.cause != nil {
		return &expiredError{fmt.Errorf("validity ran out while in doubt: %w", d.cause)}
	}
	return &expiredError{errors.New("validity ran out: not " + notWhat + " in time")}
}

// expiredError is the cause of a loss at the deadline (distlock.lost.reason
// "expired").
type expiredError struct{ error }

func (e *expiredError) Unwrap() error { return e.error }
