package distlock

import (
	"context"
	"errors"
	"time"
)

// Held is what a Lease, a MultiLease and a Leadership have in common: a
// grant that lasts until it is released or lost, with the same methods
// and the same meanings on each (the types' own methods say what differs:
// a MultiLease is in the worst state of its keys and ends when any of them
// is lost; a Leadership's Release is its Resign). Write a helper over Held
// to serve all three: one that runs work under Context and pauses while
// State is StateInDoubt, say, or one that waits for Done and reports Err.
//
// Only the three types of this package implement Held; the interface may
// gain methods that they all have.
type Held interface {
	// Owner returns the owner id the grant is held under.
	Owner() string
	// Done returns a channel closed when the grant ends: released or lost.
	Done() <-chan struct{}
	// Err returns nil while the grant is held, an error matching
	// ErrReleased once released (or its Locker closed), or one matching
	// ErrLost, wrapping the cause, once lost.
	Err() error
	// Context returns a context canceled when the grant ends, whose cause
	// is Err, and which carries the owner: Acquire with it re-enters.
	Context() context.Context
	// State reports whether the grant is held, in doubt, lost or released.
	State() State
	// Deadline returns the end of the grant's client-side validity: it is
	// reported lost then unless a renewal succeeds first.
	Deadline() time.Time
	// Refresh extends the grant to live at least ttl from now (zero: its
	// current TTL), as Lease.Refresh does.
	Refresh(ctx context.Context, ttl time.Duration) error
	// Release ends the grant and frees it in the store, as Lease.Release
	// does; ctx bounds the store calls.
	Release(ctx context.Context) error
}

// Every grant of the package is a Held.
var (
	_ Held = (*Lease)(nil)
	_ Held = (*MultiLease)(nil)
	_ Held = (*Leadership)(nil)
)

// What every Held does once it has ended, written once.

// endedState is the State of a grant that ended with err (its Err, not
// nil): lost if err matches ErrLost, else released.
func endedState(err error) State {
	if errors.Is(err, ErrLost) {
		return StateLost
	}
	return StateReleased
}

// releaseEndedErr is what Release of a grant that ended with err returns:
// a second Release says so (matching ErrReleased), a Release of a lost
// grant returns its Err (matching ErrLost). op names the call ("release
// all").
func releaseEndedErr(op, key string, err error) error {
	return &endedError{op: op, key: key, cause: err}
}
