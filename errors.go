package distlock

import (
	"errors"
	"fmt"

	"github.com/distlock/distlock/backend"
)

// Errors returned by distlock, for use with errors.Is. They are the same
// values as package backend's, so drivers and users compare against one set.
// The store's own error, when there is one, is wrapped too and reachable
// with errors.As.
var (
	// ErrNotAcquired: TryAcquire found the lock held by another owner.
	ErrNotAcquired = backend.ErrNotAcquired
	// ErrNotHeld: the store no longer holds the lock for this lease's owner.
	ErrNotHeld = backend.ErrNotHeld
	// ErrLost: the lease ended without Release: it expired, was deleted, its
	// session or connection ended, or the store stayed unreachable until the
	// lease's validity ran out. The cause is wrapped.
	ErrLost = backend.ErrLost
	// ErrReleased: the lease was released by its holder.
	ErrReleased = backend.ErrReleased
	// ErrClosed: the Locker is closed.
	ErrClosed = backend.ErrClosed
	// ErrInvalidKey: the key is empty, too long, not UTF-8, or holds control
	// characters.
	ErrInvalidKey = backend.ErrInvalidKey
	// ErrUnsupported: the backend cannot do what was asked.
	ErrUnsupported = backend.ErrUnsupported
	// ErrUnavailable: the store could not be reached or did not answer.
	ErrUnavailable = backend.ErrUnavailable
	// ErrInvalidConfig: a URL, option or parameter is malformed or impossible.
	ErrInvalidConfig = backend.ErrInvalidConfig
)

// lostError is the cause a lost lease reports: it matches ErrLost and
// unwraps to what ended the lease.
type lostError struct {
	key   string
	cause error
}

func (e *lostError) Error() string {
	return fmt.Sprintf("distlock: lease on %q lost: %v", e.key, e.cause)
}

func (e *lostError) Is(target error) bool { return target == ErrLost }
func (e *lostError) Unwrap() error        { return e.cause }

// endedError is what an operation on a lease that has ended returns: it
// names the operation and the key once, and why the lease ended without
// the cause's own "distlock: lease on KEY" ("distlock: release "k":
// already released", "distlock: refresh "k": lease lost: <why>"). It
// unwraps to the cause, so it matches ErrReleased or ErrLost.
type endedError struct {
	op, key string
	cause   error
}

func (e *endedError) Error() string {
	op := e.op
	if e.key != "" {
		op = fmt.Sprintf("%s %q", e.op, e.key)
	}
	if errors.Is(e.cause, ErrReleased) {
		return fmt.Sprintf("distlock: %s: already released", op)
	}
	var lost *lostError
	if errors.As(e.cause, &lost) && lost.key == e.key {
		return fmt.Sprintf("distlock: %s: lease lost: %v", op, lost.cause)
	}
	if errors.As(e.cause, &lost) {
		return fmt.Sprintf("distlock: %s: lease on %q lost: %v", op, lost.key, lost.cause)
	}
	return fmt.Sprintf("distlock: %s: %v", op, e.cause)
}

func (e *endedError) Unwrap() error { return e.cause }
