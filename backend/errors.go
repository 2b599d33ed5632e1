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
// Their texts carry no package prefix: they are always wrapped by one
// ("redislock: acquire "k": store unavailable: ..."), and an error reads
// each prefix once.
var (
	// ErrNotAcquired: the lock is held by another owner.
	ErrNotAcquired = errors.New("lock held by another owner")
	// ErrNotHeld: the store no longer holds the lock for this owner.
	ErrNotHeld = errors.New("lock not held")
	// ErrLost: a lease ended without Release (expired, deleted, session or
	// connection gone, validity ran out while the store was unreachable).
	ErrLost = errors.New("lease lost")
	// ErrReleased: the lease was released by its holder.
	ErrReleased = errors.New("lease released")
	// ErrClosed: the Locker or Driver is closed.
	ErrClosed = errors.New("locker closed")
	// ErrInvalidKey: the key is empty, too long, or has characters no store
	// may see.
	ErrInvalidKey = errors.New("invalid key")
	// ErrUnsupported: the store cannot do what was asked.
	ErrUnsupported = errors.New("unsupported")
	// ErrUnavailable: the store could not be reached or did not answer; the
	// operation's outcome may be unknown.
	ErrUnavailable = errors.New("store unavailable")
	// ErrInvalidConfig: a URL, option or parameter is malformed or impossible.
	ErrInvalidConfig = errors.New("invalid configuration")
)

// NotAcquiredError reports that a key is held by another owner. It matches
// ErrNotAcquired with errors.Is. Its text names no key: the error it is
// wrapped in does (distlock: acquire "k": held by another owner).
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
		return fmt.Sprintf("held by another owner (expires within %v)", roundRetry(e.RetryAfter))
	}
	return "held by another owner"
}

// roundRetry rounds a remaining lifetime for people: to the millisecond,
// or to 0.1 s beyond 10 s.
func roundRetry(d time.Duration) time.Duration {
	if d > 10*time.Second {
		return d.Round(100 * time.Millisecond)
	}
	return d.Round(time.Millisecond)
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
