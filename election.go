package distlock

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/distlock/distlock/backend"
)

// Leader election, built on the mutex: an election named N is the lock
// N, its leader is the lock's holder, and its term is the holder's
// fencing token. It therefore works on every backend, with the mutex's
// guarantees (renewal, doubt, loss before the store can grant the lock to
// anyone else, tokens that strictly increase) and its costs: a campaign
// waits as Acquire does (the store's queue, notifications or polling), and
// Leader and Observe read the lock with the driver's backend.Inspector.
// docs/primitives.md says what that means per store.

// MaxCandidateValueLen is the longest value, in bytes, a candidate may
// campaign with: the value and a random suffix (which keeps two
// candidates with the same value apart) form the lock's owner id, at most
// 128 bytes.
const MaxCandidateValueLen = 128 - ownerSuffixLen

// ownerSuffixLen is the length of ".<32 hex digits>" appended to a
// candidate's value.
const ownerSuffixLen = 1 + 32

// ErrNoLeader: no candidate leads the election now.
var ErrNoLeader = errors.New("no leader")

// ErrCampaigning: a Campaign of this Election is already under way, or
// this Election leads (Election.Leadership returns its Leadership). One
// Election campaigns once at a time; make another Election for another
// candidate.
var ErrCampaigning = errors.New("this Election is already campaigning or leading")

// An Election is one candidate's handle on the election named by its
// name, made by Locker.Election. It is safe for concurrent use. Every
// Election with the same name on the same store takes part in the same
// election, whichever Locker or process made it.
type Election struct {
	l        *Locker
	name     string
	opts     []Option
	interval time.Duration

	err error // an option refused (Election returns it)

	mu          sync.Mutex
	campaigning bool
	cur         *Leadership
}

// Election returns a handle on the election called name (a key: the
// election is the lock of that name, so do not use name as a lock of its
// own). It sends nothing to the store. It fails with ErrInvalidKey for a
// name no store may see and with ErrInvalidConfig, naming the option, for
// an option it refuses.
func (l *Locker) Election(name string, opts ...ElectionOption) (*Election, error) {
	if err := checkKey(name, l.maxKey); err != nil {
		return nil, fmt.Errorf("distlock: election: %w", err)
	}
	e := &Election{l: l, name: name, interval: defaultObserveInterval}
	for _, o := range opts {
		o(e)
	}
	if e.err != nil {
		return nil, fmt.Errorf("distlock: election %q: %w", name, e.err)
	}
	return e, nil
}

// Name returns the election's name.
func (e *Election) Name() string { return e.name }

// CheckCandidateValue reports why value cannot be a candidate's value:
// it must be 1 to MaxCandidateValueLen bytes of printable ASCII without
// spaces (the characters of an owner id). Campaign calls it.
func CheckCandidateValue(value string) error {
	if value == "" || len(value) > MaxCandidateValueLen {
		return fmt.Errorf("%w: candidate value must be 1 to %d bytes, got %d", ErrInvalidConfig, MaxCandidateValueLen, len(value))
	}
	for i := 0; i < len(value); i++ {
		if c := value[i]; c < 0x21 || c > 0x7e {
			return fmt.Errorf("%w: candidate value %q must be printable ASCII without spaces (byte %d is 0x%02x)", ErrInvalidConfig, value, i, c)
		}
	}
	return nil
}

// Campaign makes this candidate leader, waiting until it is elected or
// ctx ends (the error then wraps ctx's, and nothing of the campaign stays
// queued in the store). value is what Leader and Observe report for this
// candidate to every participant (a host name, an address); see
// CheckCandidateValue. Candidates with the same value are still distinct
// candidates: each lock is taken under the value and a random suffix.
//
// One Election campaigns once at a time: a Campaign while another is under
// way or while this Election leads returns an error matching
// ErrCampaigning. Once its Leadership has ended (resigned or lost) the
// Election may campaign again.
func (e *Election) Campaign(ctx context.Context, value string) (*Leadership, error) {
	if err := CheckCandidateValue(value); err != nil {
		return nil, fmt.Errorf("distlock: campaign %q: %w", e.name, err)
	}
	e.mu.Lock()
	if e.campaigning || (e.cur != nil && e.cur.le.Err() == nil) {
		e.mu.Unlock()
		return nil, fmt.Errorf("distlock: campaign %q: %w", e.name, ErrCampaigning)
	}
	e.campaigning = true
	e.mu.Unlock()
	defer func() {
		e.mu.Lock()
		e.campaigning = false
		e.mu.Unlock()
	}()
	owner := value + "." + newOwner()
	opts := append(append([]Option(nil), e.opts...), WithOwner(owner))
	le, err := e.l.acquirePrim(ctx, e.name, opts, true, primElection)
	if err != nil {
		return nil, fmt.Errorf("distlock: campaign %q: %w", e.name, err)
	}
	ld := &Leadership{le: le, value: value}
	e.mu.Lock()
	e.cur = ld
	e.mu.Unlock()
	return ld, nil
}

// Leadership returns this Election's current Leadership, or nil if it
// has none that has not ended.
func (e *Election) Leadership() *Leadership {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.cur == nil || e.cur.le.Err() != nil {
		return nil
	}
	return e.cur
}

// A Leadership is a term of office won by Campaign. It ends when
// resigned, when its lease is lost (Err then matches ErrLost), or when its
// Locker closes. It is safe for concurrent use.
type Leadership struct {
	le *Lease

	proclaiming sync.Mutex // one Proclaim at a time, so value is the store's last
	mu          sync.Mutex
	value       string
}

// Value returns the value this leader campaigned with, or the last it
// proclaimed.
func (ld *Leadership) Value() string {
	ld.mu.Lock()
	defer ld.mu.Unlock()
	return ld.value
}

// Proclaim changes the value this leader is known by (what Leader and
// Observe report in LeaderInfo.Value) without giving up office: the term
// (the fencing token) and the owner id stay as they were, as with etcd's
// Election.Proclaim. The store sets the value in one step that checks
// that this leader's lock is still held under its grant, so a deposed
// leader never changes its successor's value: if the store says the lock
// is gone the leadership is lost and the error matches ErrLost and
// ErrNotHeld; a leadership already ended returns its Err (ErrLost or
// ErrReleased). value follows CheckCandidateValue's rules.
//
// Proclaim returns when ctx ends, when the leadership's validity runs
// out, or when the leadership ends, whether or not the store's client has
// answered; an error matching ErrUnavailable then leaves it unknown
// whether the store took the value. It returns an error matching
// ErrUnsupported on a backend that keeps no value beside a lock
// (backend.Capabilities.Values; docs/primitives.md lists them). Concurrent
// Proclaims of one Leadership are sent one at a time, in the order they
// take their turn.
func (ld *Leadership) Proclaim(ctx context.Context, value string) error {
	l, h := ld.le.l, ld.le.h
	if err := CheckCandidateValue(value); err != nil {
		return fmt.Errorf("distlock: proclaim %q: %w", h.key, err)
	}
	an, ok := l.d.(backend.Announcer)
	if !ok || !l.caps.Values {
		return fmt.Errorf("distlock: proclaim %q: %w: the %s backend keeps no value beside a lock (no backend.Announcer with Capabilities.Values)", h.key, ErrUnsupported, l.caps.Name)
	}
	ld.proclaiming.Lock()
	defer ld.proclaiming.Unlock()
	if err := ld.le.Err(); err != nil {
		return &endedError{op: "proclaim", key: h.key, cause: err}
	}
	l.mu.Lock()
	lock, deadline := h.grant.Lock, h.deadline
	l.mu.Unlock()
	// Bounded like a renewal: by the lease's validity and by its end.
	pctx, cancel := context.WithDeadline(ctx, deadline)
	defer cancel()
	pctx, cancelCause := context.WithCancelCause(pctx)
	defer cancelCause(nil)
	stop := context.AfterFunc(ld.le.Context(), func() { cancelCause(ld.le.ended()) })
	defer stop()
	err, answered := l.call(pctx, func(ctx context.Context) error { return an.SetValue(ctx, lock, value) }, nil)
	switch {
	case !answered:
		if ended := ld.le.ended(); ended != nil {
			return &endedError{op: "proclaim", key: h.key, cause: ended}
		}
		return fmt.Errorf("distlock: proclaim %q: %w: unanswered: %w", h.key, ErrUnavailable, context.Cause(pctx))
	case errors.Is(err, ErrNotHeld):
		l.lose(h, err)
		return &endedError{op: "proclaim", key: h.key, cause: ld.le.Err()}
	case err != nil:
		return fmt.Errorf("distlock: proclaim %q: %w", h.key, err)
	}
	ld.mu.Lock()
	ld.value = value
	ld.mu.Unlock()
	return nil
}

// Term returns the leader's term: the fencing token of the lock behind the
// election, strictly greater than every earlier leader's term (where the
// store's tokens are, see docs/safety.md). Pass it to the resources the
// leader writes so that they reject a deposed leader.
func (ld *Leadership) Term() uint64 { return ld.le.Token() }

// Owner returns the owner id the leader's lock is held under (the value
// and a random suffix), as LeaderInfo.Owner reports it.
func (ld *Leadership) Owner() string { return ld.le.Owner() }

// Done returns a channel closed when the leadership ends.
func (ld *Leadership) Done() <-chan struct{} { return ld.le.Done() }

// Err returns nil while this candidate leads, an error matching
// ErrReleased after Resign or the Locker's Close, or one matching ErrLost
// (wrapping the cause) once leadership was lost.
func (ld *Leadership) Err() error { return ld.le.Err() }

// State reports whether the leadership is held, in doubt, lost or
// resigned (StateReleased), as Lease.State does.
func (ld *Leadership) State() State { return ld.le.State() }

// Context returns a context canceled when the leadership ends, whose cause
// is Err. Run the leader's work under it.
func (ld *Leadership) Context() context.Context { return ld.le.Context() }

// Lease returns the lease behind the leadership (its Key, Token and
// Permits besides what Leadership has itself). Releasing it is resigning.
func (ld *Leadership) Lease() *Lease { return ld.le }

// Locker returns the Locker that holds the leadership's lease.
func (ld *Leadership) Locker() *Locker { return ld.le.Locker() }

// Deadline returns the end of the leadership's client-side validity, as
// Lease.Deadline does: it is lost then unless a renewal succeeds first.
func (ld *Leadership) Deadline() time.Time { return ld.le.Deadline() }

// Refresh extends the leadership's lease, as Lease.Refresh does.
func (ld *Leadership) Refresh(ctx context.Context, ttl time.Duration) error {
	return ld.le.Refresh(ctx, ttl)
}

// Release is Resign, under the name Held has for it: a helper over Held
// that releases a Leadership resigns it.
func (ld *Leadership) Release(ctx context.Context) error { return ld.Resign(ctx) }

// Resign gives up the leadership: the lock is released and the next
// candidate can be elected at once. Resigning twice returns an error
// matching ErrReleased; resigning a lost leadership returns its Err.
func (ld *Leadership) Resign(ctx context.Context) error {
	if err := ld.le.Release(ctx); err != nil {
		return fmt.Errorf("distlock: resign: %w", err)
	}
	return nil
}
