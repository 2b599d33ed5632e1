package backend

import (
	"errors"
	"fmt"
	"time"
)

// The error kinds every driver reports, re-exported by package distlock.
// Drivers wrap them together with the store's own error, e.g.
//
//	fmt.Errorf("redislock: acquire %q: %w: %w", key, backend.ErrUnavailable, err)
//
// so that errors.Is finds the kind and errors.As finds the native error.
var (
	// ErrNotAcquired: the lock is held by another owner.
	ErrNotAcquired = errors.New("distlock: lock held by another owner")
	// ErrNotHeld: the store no longer holds the lock for this owner.
	ErrNotHeld = errors.New("distlock: lock not held")
	// ErrLost: a lease ended without Release (expired, deleted, session or
	// connection gone, validity ran out while the store was unreachable).
	ErrLost = errors.New("distlock: lease lost")
	// ErrReleased: the lease was released by its holder.
	ErrReleased = errors.New("distlock: lease released")
	// ErrClosed: the Locker or Driver is closed.
	ErrClosed = errors.New("distlock: locker closed")
	// ErrInvalidKey: the key is empty, too long, or has characters no store
	// may see.
	ErrInvalidKey = errors.New("distlock: invalid key")
	// ErrUnsupported: the store cannot do what was asked.
	ErrUnsupported = errors.New("distlock: unsupported")
	// ErrUnavailable: the store could not be reached or did not answer; the
	// operation's outcome may be unknown.
	ErrUnavailable = errors.New("distlock: store unavailable")
	// ErrInvalidConfig: a URL, option or parameter is malformed or impossible.
	ErrInvalidConfig = errors.New("distlock: invalid configuration")
)

// NotAcquiredError reports that a key is held by another owner. It matches
// ErrNotAcquired with errors.Is.
type NotAcquiredError struct {
	Key string
	// RetryAfter is the holder's remaining lifetime if the store knows it
	// (0 otherwise): a waiter need not sleep longer than this.
	RetryAfter time.Duration
}

// NotAcquired returns a *NotAcquiredError for key.
func NotAcquired(key string, retryAfter time.Duration) error {
	return &NotAcquiredError{Key: key, RetryAfter: retryAfter}
}

func (e *NotAcquiredError) Error() string {
	if e.RetryAfter > 0 {
		return fmt.Sprintf("distlock: lock %q held by another owner (expires within %v)", e.Key, e.RetryAfter)
	}
	return fmt.Sprintf("distlock: lock %q held by another owner", e.Key)
}

// Is reports whether target is ErrNotAcquired.
func (e *NotAcquiredError) Is(target error) bool { return target == ErrNotAcquired }

// RetryAfter returns the holder's remaining lifetime carried by err, or 0.
func RetryAfter(err error) time.Duration {
	var na *NotAcquiredError
	if errors.As(err, &na) {
		return na.RetryAfter
	}
	return 0
}
