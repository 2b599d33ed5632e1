package distlock

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// A Lease is a held lock. It is safe for concurrent use.
//
// A Lease ends when it is released, when it is lost (its TTL ran out, the
// store deleted it, the session or connection holding it ended, or the
// store stayed unreachable until the lease's validity ran out), or when its
// Locker closes. Done is closed then and Err says why. Where the store
// frees a lock only by its TTL or session timeout, a lease is reported lost
// on the client before the store can grant the lock to anyone else; where
// the store frees it at once (a SQL connection killed, a server restarted,
// an operator deleting the lock) the holder learns at its next renewal, so
// protect the resource with the fencing token (see docs/safety.md).
type Lease struct {
	l      *Locker
	h      *hold
	parent context.Context // the acquisition's caller's ctx, whose values Context carries

	prev, next *Lease        // the hold's other Leases; guarded by Locker.mu
	released   leaseReleased // the cause Release ends it with, kept here to spare an allocation

	// Guarded by Locker.mu. The context is made on first use (Context,
	// Done): a lease that is acquired and released without either never
	// makes one, which is most of the cost of a Lease.
	cause  error // why the lease ended; nil while it lasts
	ctx    context.Context
	cancel context.CancelCauseFunc
}

// context returns the lease's context, made now if it was not yet, and
// ended at once if the lease already has.
func (le *Lease) context() context.Context {
	le.l.mu.Lock()
	defer le.l.mu.Unlock()
	if le.ctx == nil {
		base := ContextWithOwner(context.WithoutCancel(le.parent), le.h.owner)
		le.ctx, le.cancel = context.WithCancelCause(base)
		if le.cause != nil {
			le.cancel(le.cause)
		}
	}
	return le.ctx
}

// ended returns why the lease ended, nil while it lasts.
func (le *Lease) ended() error {
	le.l.mu.Lock()
	defer le.l.mu.Unlock()
	return le.cause
}

// State is a lease's condition as this process knows it.
type State int

const (
	// StateHeld: the last renewal (or the acquisition) succeeded.
	StateHeld State = iota + 1
	// StateInDoubt: the last renewal failed because the store could not be
	// reached, a renewal has gone unanswered for a sixth of the TTL, or the
	// backend reported it lost contact with the store (a ZooKeeper
	// connection dropped); the lease is still within its validity
	// (see Deadline, which such a report may bring forward) and may yet be
	// kept: it is held again once a renewal sent after the loss of contact
	// succeeds. Work that must not run without the lock should pause.
	StateInDoubt
	// StateLost: the lease ended without Release.
	StateLost
	// StateReleased: the lease was released (or its Locker closed).
	StateReleased
)

func (s State) String() string {
	switch s {
	case StateHeld:
		return "held"
	case StateInDoubt:
		return "in doubt"
	case StateLost:
		return "lost"
	case StateReleased:
		return "released"
	}
	return fmt.Sprintf("State(%d)", int(s))
}

// Locker returns the Locker that holds the lease.
func (le *Lease) Locker() *Locker { return le.l }

// Key returns the lock's key.
func (le *Lease) Key() string { return le.h.key }

// Owner returns the owner id the lock is held under. Pass it to WithOwner
// (or ContextWithOwner) in another call or process to re-enter.
func (le *Lease) Owner() string { return le.h.owner }

// Token returns the fencing token: strictly greater than any token granted
// before for this key, to any holder. A protected resource that remembers
// the largest token it has seen and rejects smaller ones cannot be written
// by a holder whose lease was lost. Re-entries share their hold's token.
// A read lease of an RWMutex carries the token of the last write granted
// (readers share it; see RWMutex).
func (le *Lease) Token() uint64 { return le.h.grant.Token }

// Done returns a channel closed when the lease ends: released or lost.
func (le *Lease) Done() <-chan struct{} { return le.context().Done() }

// Err returns nil while the lease is held, an error matching ErrReleased
// after Release or Close, or one matching ErrLost (and wrapping the cause)
// once lost.
func (le *Lease) Err() error {
	if le.ended() == nil && !le.l.endIfPastDeadline(le.h) {
		return nil
	}
	return le.ended()
}

// Context returns a context canceled when the lease ends, whose cause is
// Err. It carries the values of the ctx the lease was acquired with, and the
// lease's owner: Acquire with it (or a context derived from it) re-enters
// the lock.
func (le *Lease) Context() context.Context { return le.context() }

// State reports whether the lease is held, in doubt, lost or released.
func (le *Lease) State() State {
	switch err := le.Err(); {
	case err == nil:
		le.l.mu.Lock()
		h := le.h
		unanswered := h.renewing && time.Since(h.renewAt) > unansweredAfter(h.ttl)
		doubt := h.doubt.cause
		le.l.mu.Unlock()
		if doubt != nil || unanswered {
			return StateInDoubt
		}
		return StateHeld
	default:
		return endedState(err)
	}
}

// Deadline returns the end of the lease's client-side validity: the lease
// is reported lost at this instant unless a renewal succeeds first.
func (le *Lease) Deadline() time.Time {
	le.l.mu.Lock()
	defer le.l.mu.Unlock()
	return le.h.deadline
}

// Refresh extends the lease so that it lives at least ttl from now (zero
// means its current TTL); it never shortens it. Backends whose locks live as
// long as a session or connection only confirm the lock is still held. If
// the store says the lock is gone, the lease is lost and the error matches
// ErrLost and ErrNotHeld. If the lease ends while the refresh is in flight
// (its validity runs out first, or it is released), the error is its Err,
// whatever the store answered.
//
// Refresh returns when ctx ends or the lease does, whether or not the
// store's client has answered (a client may ignore ctx). A refresh left
// unanswered when ctx ends is not a loss: the error matches ErrUnavailable
// and ctx's error, the lease is in doubt until its deadline, and the
// answer, if it comes while the lease lasts, is recorded then.
func (le *Lease) Refresh(ctx context.Context, ttl time.Duration) error {
	if err := le.Err(); err != nil {
		return &endedError{op: "refresh", key: le.h.key, cause: err}
	}
	if ttl < 0 {
		return fmt.Errorf("distlock: refresh %q: %w: TTL %v is negative", le.h.key, ErrInvalidConfig, ttl)
	}
	le.l.mu.Lock()
	ttl = max(ttl, le.h.ttl)
	lock := le.h.grant.Lock
	le.l.mu.Unlock()
	if ttl < le.l.caps.MinTTL {
		return fmt.Errorf("distlock: refresh %q: %w: TTL %v is below the minimum %v", le.h.key, ErrInvalidConfig, ttl, le.l.caps.MinTTL)
	}
	if err := le.l.checkMaxTTL(ttl); err != nil {
		return fmt.Errorf("distlock: refresh %q: %w", le.h.key, err)
	}
	// The refresh ends with the lease too: a lease that ends (its
	// validity ran out, it was released) while the driver has not
	// answered returns at once, whatever the driver does with ctx.
	rctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	stop := context.AfterFunc(le.Context(), func() { cancel(le.ended()) })
	defer stop()
	sent, err := le.l.refreshHold(rctx, le.h, lock, ttl)
	if err != nil {
		le.l.refreshFailed(le.h, err)
		if errors.Is(err, ErrNotHeld) {
			return &endedError{op: "refresh", key: le.h.key, cause: le.Err()}
		}
		if ended := le.ended(); ended != nil && context.Cause(rctx) == ended && ctx.Err() == nil {
			return fmt.Errorf("distlock: refresh %q: ended while the refresh was in flight, unanswered after %v: %w",
				le.h.key, time.Since(sent).Round(time.Millisecond), ended)
		}
		if ended := le.ended(); ended != nil {
			return fmt.Errorf("distlock: refresh %q: ended while the refresh was in flight: %w (the store: %w)", le.h.key, ended, err)
		}
		return fmt.Errorf("distlock: refresh %q: %w", le.h.key, err)
	}
	if !le.l.extended(le.h, sent, ttl) {
		return fmt.Errorf("distlock: refresh %q: %w: the store went out of contact while the refresh was in flight; the lease stays in doubt", le.h.key, ErrUnavailable)
	}
	if err := le.ended(); err != nil {
		// It ended while the refresh was in flight (its validity ran out,
		// or it was released): the store's answer extended nothing the
		// caller still holds, and the Locker has released the lock.
		return fmt.Errorf("distlock: refresh %q: ended while the refresh was in flight: %w", le.h.key, err)
	}
	return nil
}

// Release ends the lease. The lock is freed in the store when the last
// Lease of a re-entered hold is released. ctx bounds the store call; use a
// fresh short timeout in deferred releases, not a ctx that may already be
// canceled.
//
// Releasing a lost lease returns its Err (matching ErrLost); the store no
// longer held the lock. Releasing twice returns an error matching
// ErrReleased. If the store cannot be reached the lease still ends here and
// the lock expires by its TTL; the error matches ErrUnavailable. The lease
// ends before the store call, and Release returns when ctx ends whether or
// not the store's client has answered (a client may ignore ctx): the call
// goes on in the background, and an Acquire by the same owner waits for it.
func (le *Lease) Release(ctx context.Context) error {
	ctx, span := le.l.tel.startRelease(ctx, le.h)
	freed, err := le.release(ctx)
	endRelease(span, freed, err)
	return err
}

// release is Release; freed reports whether it released the lock in the
// store.
func (le *Lease) release(ctx context.Context) (freed bool, err error) {
	l, h := le.l, le.h
	l.endIfPastDeadline(h) // a lease past its deadline is lost, not released
	l.mu.Lock()
	if le.cause != nil {
		err := le.cause
		l.mu.Unlock()
		return false, releaseEndedErr("release", h.key, err)
	}
	le.released.key = h.key
	le.end(&le.released)
	h.unlink(le)
	if h.leases != nil || h.state != holdHeld {
		l.mu.Unlock()
		return false, nil
	}
	return true, l.releaseEnded(ctx, h, ErrReleased, nil) // unlocks
}

// leaseReleased is the cause a Lease's context ends with when its holder
// releases it: `distlock: lease on "key": <ErrReleased>`. Every Release
// needs one, so its message is formatted only when read, and it is a field
// of the Lease, not an allocation of its own.
type leaseReleased struct{ key string }

func (e *leaseReleased) Error() string {
	return fmt.Sprintf("distlock: lease on %q: %v", e.key, ErrReleased)
}

func (e *leaseReleased) Unwrap() error { return ErrReleased }

// unlink takes le off h's list of Leases. Locker.mu is held.
func (h *hold) unlink(le *Lease) {
	if le.prev != nil {
		le.prev.next = le.next
	} else if h.leases == le {
		h.leases = le.next
	}
	if le.next != nil {
		le.next.prev = le.prev
	}
	le.prev, le.next = nil, nil
}
