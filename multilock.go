package distlock

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"time"
)

// Multi-lock: AcquireAll holds one lock per key, all under one owner, and
// ties their fates together. On every backend it can take the keys one
// after another, in one global order (the ordered path, takeInOrder): one
// acquisition per key, so N keys cost N acquisitions' round trips. A store
// that takes several keys in one atomic step (Capabilities.MultiAtomic:
// mem, Redis on one node, etcd) is asked for all of them at once first:
// one round trip, and no other client ever sees a part of the set held by
// that attempt. multistep.go takes the keys both ways, and gives them
// back. Either way each key is a lock of its own,
// with its own token, renewal and loss, and is released on its own (the
// releases sent together). docs/primitives.md lists the costs per store.

// A MultiLease holds every key of an AcquireAll or TryAcquireAll. It is
// safe for concurrent use. It ends as a whole: when it is released, when
// its Locker closes, or when any of its keys' leases is lost, in which
// case the other keys are released at once (in the background) and Err
// matches ErrLost, naming the key that was lost.
type MultiLease struct {
	l      *Locker
	keys   []string // sorted, distinct
	leases []*Lease // leases[i] holds keys[i]
	ctx    context.Context
	cancel context.CancelCauseFunc
	stops  []func() bool

	once      sync.Once // ends the parts after a loss
	releasing atomic.Bool
}

// AcquireAll takes every key of keys, waiting as Acquire does, or none
// of them. keys is a set: duplicates are taken once, and the keys are
// taken in increasing byte order whatever their order in keys, so
// AcquireAlls of overlapping sets never deadlock each other (an Acquire of
// a single key, or a user's own sequence of Acquires, can still deadlock
// with them, as with any locks). Where the store takes several keys in
// one step (Capabilities().MultiAtomic), AcquireAll first makes one such
// attempt; if a key is held elsewhere it then waits in the increasing
// order, holding the keys it got while it waits for the next, as on any
// store. Every key is held under one owner (WithOwner, the owner
// ctx carries, or a fresh one): the MultiLease's Context re-enters each of
// them. opts apply to every key.
//
// If a key cannot be taken (ctx ended, an error), the keys already taken
// are released before AcquireAll returns (each within WithReleaseTimeout)
// and the error names the key. An empty set is refused with an error
// matching ErrInvalidKey, as is an invalid key (before anything is sent).
func (l *Locker) AcquireAll(ctx context.Context, keys []string, opts ...Option) (*MultiLease, error) {
	return l.acquireAll(ctx, keys, opts, true)
}

// TryAcquireAll makes one attempt at each key of keys, in the order
// AcquireAll uses, and stops at the first held by another owner: it then
// releases what it took and returns an error matching ErrNotAcquired that
// names that key. Where the store takes several keys in one step
// (Capabilities().MultiAtomic) and can take this set so, the attempt is
// that one step instead: one round trip, and when a key is held nothing
// is taken at all, not even for a moment. (A set the store cannot take
// in one step goes key by key: more than 64 keys on etcd, whose
// transactions take at most etcdlock.MaxMultiKeys, or a set with a key
// the owner already holds through this Locker. Redis and memlock have no
// such limit.) Otherwise it is AcquireAll.
func (l *Locker) TryAcquireAll(ctx context.Context, keys []string, opts ...Option) (*MultiLease, error) {
	return l.acquireAll(ctx, keys, opts, false)
}

// lockOrder returns keys sorted in increasing byte order without
// duplicates: the one order in which every AcquireAll takes its keys.
func lockOrder(keys []string) []string {
	out := slices.Clone(keys)
	slices.Sort(out)
	return slices.Compact(out)
}

func (l *Locker) acquireAll(ctx context.Context, keys []string, opts []Option, wait bool) (*MultiLease, error) {
	if len(keys) == 0 {
		return nil, fmt.Errorf("distlock: acquire all: %w: no keys", ErrInvalidKey)
	}
	keys = lockOrder(keys)
	for _, k := range keys {
		if err := checkKey(k, l.maxKey); err != nil {
			return nil, fmt.Errorf("distlock: acquire all: %w", err)
		}
	}
	c := applyOptions(opts)
	if c.ownerErr != nil {
		return nil, fmt.Errorf("distlock: acquire all: %w", c.ownerErr)
	}
	owner := c.owner
	if owner == "" {
		if o, ok := OwnerFromContext(ctx); ok {
			if err := checkOwner(o); err != nil {
				return nil, fmt.Errorf("distlock: acquire all: the ctx's owner: %w", err)
			}
			owner = o
		} else {
			owner = newOwner()
		}
	}
	opts = append(slices.Clone(opts), WithOwner(owner))
	sctx, span := l.tel.startMulti(ctx, len(keys), wait)
	leases, err := l.takeAll(sctx, keys, owner, opts, wait)
	endMulti(span, err)
	if err != nil {
		return nil, err
	}
	m := &MultiLease{l: l, keys: keys, leases: leases}
	m.ctx, m.cancel = context.WithCancelCause(leases[0].Context())
	for _, le := range leases[1:] {
		m.stops = append(m.stops, context.AfterFunc(le.Context(), func() { m.partEnded(le) }))
	}
	m.stops = append(m.stops, context.AfterFunc(leases[0].Context(), func() { m.partEnded(leases[0]) }))
	return m, nil
}

// partEnded runs when le's lease ends. If it was lost, the whole
// MultiLease is: its ctx ends with le's cause and the other keys are
// released. A part that ended otherwise was released by the Locker's
// Close (Release stops these callbacks first), which releases every part.
func (m *MultiLease) partEnded(le *Lease) {
	cause := context.Cause(le.Context())
	if errors.Is(cause, ErrLost) {
		m.lost(cause)
		return
	}
	m.cancel(cause)
}

// lost ends m because one part was lost with cause, and releases the
// other parts in the background.
func (m *MultiLease) lost(cause error) {
	m.cancel(cause)
	m.once.Do(func() {
		if !m.l.begin() {
			return // the Locker is closing: Close releases every part
		}
		go func() {
			defer m.l.ops.Done()
			ctx, cancel := context.WithTimeout(context.Background(), m.l.cfg.releaseTimeout)
			defer cancel()
			var held []*Lease
			for _, le := range m.leases {
				if le.Err() == nil {
					held = append(held, le)
				}
			}
			_ = releaseLeases(ctx, held)
		}()
	})
}

// Locker returns the Locker that holds the keys.
func (m *MultiLease) Locker() *Locker { return m.l }

// Keys returns the keys held, in the order they were taken (increasing
// bytes, without duplicates).
func (m *MultiLease) Keys() []string { return slices.Clone(m.keys) }

// Owner returns the owner id every key is held under.
func (m *MultiLease) Owner() string { return m.leases[0].Owner() }

// Tokens returns each key's fencing token.
func (m *MultiLease) Tokens() map[string]uint64 {
	out := make(map[string]uint64, len(m.keys))
	for i, k := range m.keys {
		out[k] = m.leases[i].Token()
	}
	return out
}

// Done returns a channel closed when the MultiLease ends.
func (m *MultiLease) Done() <-chan struct{} { return m.ctx.Done() }

// Err returns nil while every key is held, an error matching ErrReleased
// after Release or Close, or one matching ErrLost, naming the key and
// wrapping the cause, once any key was lost.
func (m *MultiLease) Err() error {
	for _, le := range m.leases {
		if err := le.Err(); err != nil {
			if errors.Is(err, ErrLost) {
				m.lost(err)
			} else {
				m.cancel(err)
			}
			break
		}
	}
	if m.ctx.Err() == nil {
		return nil
	}
	return context.Cause(m.ctx)
}

// Context returns a context canceled when the MultiLease ends, whose
// cause is Err. It carries the owner: Acquire with it re-enters any of
// the keys.
func (m *MultiLease) Context() context.Context { return m.ctx }

// State reports the worst state of the keys: lost if any was lost (or
// released if the MultiLease was), in doubt if any is, else held.
func (m *MultiLease) State() State {
	if err := m.Err(); err != nil {
		return endedState(err)
	}
	s := StateHeld
	for _, le := range m.leases {
		switch ls := le.State(); ls {
		case StateLost, StateReleased:
			return ls
		case StateInDoubt:
			s = StateInDoubt
		}
	}
	return s
}

// Deadline returns the earliest Deadline of the keys' leases.
func (m *MultiLease) Deadline() time.Time {
	d := m.leases[0].Deadline()
	for _, le := range m.leases[1:] {
		d = earliest(d, le.Deadline())
	}
	return d
}

// Refresh refreshes every key's lease (see Lease.Refresh), one after
// another, and joins their errors.
func (m *MultiLease) Refresh(ctx context.Context, ttl time.Duration) error {
	var errs []error
	for _, le := range m.leases {
		errs = append(errs, le.Refresh(ctx, ttl))
	}
	return errors.Join(errs...)
}

// Release releases every key (several at a time, each bounded by ctx).
// Releasing twice returns an error matching ErrReleased; releasing a
// MultiLease that was lost returns its Err (matching ErrLost): its other
// keys are being released in the background already.
func (m *MultiLease) Release(ctx context.Context) error {
	if err := m.Err(); err != nil {
		return releaseEndedErr("release all", "", err)
	}
	if !m.releasing.CompareAndSwap(false, true) {
		return &endedError{op: "release all", cause: ErrReleased}
	}
	for _, stop := range m.stops {
		stop()
	}
	m.cancel(fmt.Errorf("distlock: multi-lease on %d keys: %w", len(m.keys), ErrReleased))
	if cause := context.Cause(m.ctx); !errors.Is(cause, ErrReleased) {
		return fmt.Errorf("distlock: release all: %w", cause) // lost meanwhile
	}
	if err := releaseLeases(ctx, m.leases); err != nil {
		return fmt.Errorf("distlock: release all: %w", err)
	}
	return nil
}
