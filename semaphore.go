package distlock

import (
	"context"
	"fmt"
	"time"

	"github.com/distlock/distlock/backend"
)

// Counting semaphores: a Semaphore named K lets at most N holders' permits
// be held at once. Each acquisition takes one or several permits as one
// Lease, with everything a lock's Lease has: a TTL renewed by the
// watchdog, doubt and loss reported the same way, Done/Err/Context, and a
// fencing token per grant, strictly increasing per semaphore. The store
// counts the permits (backend.Permits requests); a store that cannot do that
// safely returns ErrUnsupported (docs/primitives.md says which).

// MaxSemaphoreLimit is the largest number of permits a Semaphore may have.
const MaxSemaphoreLimit = backend.MaxSemaphoreLimit

// A Semaphore is a handle on the counting semaphore named by its key,
// made by Locker.Semaphore. It is safe for concurrent use and holds no
// state of its own: every Semaphore with the same key on the same store
// shares the same permits, whichever Locker or process made it. A
// semaphore and a lock with the same key are different things and never
// block each other.
//
// The limit is the acquirer's: each acquisition is granted only while the
// permits held by everyone plus those asked for are at most this
// Semaphore's limit. Callers normally agree on it. If they do not (a
// limit changed by a new release of a program), a lowered limit admits no
// one until enough holders have left, and holders above it keep their
// permits until they release them or they expire: no one is evicted.
type Semaphore struct {
	l     *Locker
	key   string
	limit int
}

// Semaphore returns a handle on the semaphore called key with limit
// permits. It sends nothing to the store. It fails with ErrInvalidKey for
// a key no store may see, with ErrInvalidConfig for a limit outside 1 to
// MaxSemaphoreLimit, and with ErrUnsupported, saying why, when the
// backend offers no semaphore.
func (l *Locker) Semaphore(key string, limit int) (*Semaphore, error) {
	if err := checkKey(key, l.maxKey); err != nil {
		return nil, fmt.Errorf("distlock: semaphore: %w", err)
	}
	if limit < 1 || limit > MaxSemaphoreLimit {
		return nil, fmt.Errorf("distlock: semaphore %q: %w: limit %d is outside 1 to %d", key, ErrInvalidConfig, limit, MaxSemaphoreLimit)
	}
	if l.caps.Semaphore == "" {
		return nil, fmt.Errorf("distlock: semaphore %q: %w: the %s backend offers no semaphore (docs/primitives.md)", key, ErrUnsupported, l.caps.Name)
	}
	return &Semaphore{l: l, key: key, limit: limit}, nil
}

// Key returns the semaphore's name.
func (s *Semaphore) Key() string { return s.key }

// Limit returns how many permits this handle lets be held at once.
func (s *Semaphore) Limit() int { return s.limit }

// Acquire takes one permit, waiting while all are held, until ctx ends
// (see AcquireN).
func (s *Semaphore) Acquire(ctx context.Context, opts ...Option) (*Lease, error) {
	return s.acquire(ctx, 1, opts, true)
}

// TryAcquire makes one attempt to take one permit (see TryAcquireN).
func (s *Semaphore) TryAcquire(ctx context.Context, opts ...Option) (*Lease, error) {
	return s.acquire(ctx, 1, opts, false)
}

// AcquireN takes n permits as one Lease, all of them or none, waiting
// until they are free or ctx ends. ctx bounds only the wait, as for
// Locker.Acquire; when it ends first nothing of the attempt stays queued
// or held. Waiters are served in arrival order where the store queues
// them (Capabilities().Fair); elsewhere a waiter for many permits can be
// overtaken by waiters for fewer.
//
// opts may set the TTL (WithTTL) and turn renewal off (WithoutAutoRenew).
// Every grant has a fresh owner id of its own (Lease.Owner): permits are
// never re-entered, so an owner carried by ctx is ignored. WithOwner(label)
// names who holds the permits (a host:pid, as `distlock status` shows
// them): the grant's owner id is then label, a dot and a random suffix, as
// a campaign's is its value and one; a label longer than
// MaxCandidateValueLen bytes is refused with ErrInvalidConfig. n outside 1 to Limit is refused with
// ErrInvalidConfig before anything is sent.
func (s *Semaphore) AcquireN(ctx context.Context, n int, opts ...Option) (*Lease, error) {
	return s.acquire(ctx, n, opts, true)
}

// TryAcquireN makes one attempt to take n permits: if fewer are free it
// fails at once with an error matching ErrNotAcquired and leaves nothing
// behind. Otherwise it is AcquireN.
func (s *Semaphore) TryAcquireN(ctx context.Context, n int, opts ...Option) (*Lease, error) {
	return s.acquire(ctx, n, opts, false)
}

// Do takes one permit (waiting as Acquire does), runs fn with a context
// canceled the moment the permit's lease is lost, and releases the permit
// afterwards, as Locker.Do does for a lock.
func (s *Semaphore) Do(ctx context.Context, fn func(ctx context.Context) error, opts ...Option) (err error) {
	le, err := s.Acquire(ctx, opts...)
	if err != nil {
		return err
	}
	return s.l.runHeld(ctx, le, fn)
}

// Permits returns how many permits of a Semaphore the lease holds, or 0
// for a lock's lease.
func (le *Lease) Permits() int { return le.h.permits }

// acquire is the Semaphore's Acquire and TryAcquire, measured and traced
// as a lock's acquisition of the semaphore's key.
func (s *Semaphore) acquire(ctx context.Context, n int, opts []Option, wait bool) (*Lease, error) {
	actx, op := s.l.tel.startAcquire(ctx, s.key, wait, primSemaphore)
	le, err := s.acquireAs(actx, n, opts, wait, op.tag())
	op.end(ctx, le, err)
	return le, err
}

func (s *Semaphore) acquireAs(ctx context.Context, n int, opts []Option, wait bool, tag holdTag) (*Lease, error) {
	l := s.l
	if n < 1 || n > s.limit {
		return nil, fmt.Errorf("distlock: semaphore %q: %w: %d permits asked for, want 1 to the limit %d", s.key, ErrInvalidConfig, n, s.limit)
	}
	c := applyOptions(opts)
	owner := newOwner()
	switch {
	case c.ownerErr != nil:
		return nil, fmt.Errorf("distlock: semaphore %q: %w", s.key, c.ownerErr)
	case len(c.owner) > MaxCandidateValueLen:
		return nil, fmt.Errorf("distlock: semaphore %q: %w: WithOwner label of permits must be at most %d bytes (a dot and a random suffix follow it), got %d", s.key, ErrInvalidConfig, MaxCandidateValueLen, len(c.owner))
	case c.owner != "":
		owner = c.owner + "." + owner
	}
	ttl, err := l.ttlFor(c)
	if err != nil {
		return nil, fmt.Errorf("distlock: semaphore %q: %w", s.key, err)
	}
	if !l.begin() {
		return nil, fmt.Errorf("distlock: semaphore %q: %w", s.key, ErrClosed)
	}
	defer l.ops.Done()
	ctx, bound := l.bindClose(ctx)
	defer bound.stop()

	h := l.permitHold(s.key, owner, n, tag)
	req := backend.Request{
		Kind: backend.Permits, Key: s.key, Owner: h.owner, Limit: s.limit, Permits: n,
		TTL: ttl, Drift: l.cfg.drift(ttl),
		OnLost:     func(err error) { l.driverLost(h, err) },
		OnDoubt:    func(cause error, until time.Time) { l.driverDoubt(h, cause, until) },
		OnRestored: func() { l.driverRestored(h) },
	}
	g, err := l.obtain(ctx, h, req, wait)
	return l.settle(ctx, h, g, err, ttl, !c.noRenew)
}

// permitHold registers a pending hold for a grant of n permits under a
// fresh owner (so it never meets another hold).
func (l *Locker) permitHold(key, owner string, n int, tag holdTag) *hold {
	h := newHold(holdKey{key, owner, 0}, tag)
	h.permits = n
	l.mu.Lock()
	l.holds[holdKey{key, owner, 0}] = h
	l.mu.Unlock()
	return h
}
