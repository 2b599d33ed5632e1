package distlock

import (
	"context"
	"fmt"

	"github.com/distlock/distlock/backend"
)

// Read-write locks: many readers or one writer. A read or write lease is
// a *Lease, held, renewed, doubted, lost and released exactly as a
// mutex's (the same watchdog and validity rules); only the store's side
// of it differs, and only stores that have read-write locks natively
// offer them (backend.Capabilities.RW; docs/primitives.md compares them).
//
// The rules:
//
//   - Never a writer together with a reader or another writer; readers
//     of different owners hold together.
//   - Writers are not starved: a writer that waits blocks new readers
//     (owners that do not already hold the read side) until it is granted
//     or gives up, so a stream of readers cannot keep it out; it gets in
//     once the readers it found have released (or expired).
//   - A write lease's Token is strictly greater than every token granted
//     before for the key's read-write lock; a read lease's Token is the
//     token of the last write granted (0 before the first), so a reader
//     can tell which write it reads.
//   - Re-entry follows the mutex: the same owner (a Lease's Context, or
//     WithOwner) taking the same side again shares the hold. An owner
//     that holds the write side may take the read side: the read lease
//     shares the write hold (and its token), so the lock stays exclusive
//     until both are released; there is no downgrade. An owner that
//     holds (or is acquiring) the read side and asks for the write side
//     is refused at once with an error matching ErrUpgrade: waiting would
//     deadlock on its own read. Release the read lease first, take the
//     write lease, and re-read.
//
// The read-write lock named key is not the mutex named key: they never
// block each other.
//
// claimRW (hold.go) applies the rules between one owner's two sides when
// a hold is claimed.

// ErrUpgrade: the owner holds the read side of the read-write lock and
// asked for its write side (see RWMutex.Lock).
var ErrUpgrade = backend.ErrUpgrade

// An RWMutex is a handle on the read-write lock named by its key, made by
// Locker.RWMutex. It holds no state of its own and is safe for concurrent
// use; every RWMutex with the same key on the same store is the same lock.
type RWMutex struct {
	l   *Locker
	key string
}

// RWMutex returns a handle on the read-write lock named key. It sends
// nothing to the store. If the backend has no read-write locks the error
// matches ErrUnsupported and names the backend; no imitation is built from
// mutexes.
func (l *Locker) RWMutex(key string) (*RWMutex, error) {
	if err := checkKey(key, l.maxKey); err != nil {
		return nil, fmt.Errorf("distlock: rw mutex: %w", err)
	}
	if l.caps.RW == "" {
		return nil, fmt.Errorf("distlock: rw mutex %q: %w: the %s backend has no native read-write locks (docs/primitives.md lists the stores that do)", key, ErrUnsupported, l.caps.Name)
	}
	return &RWMutex{l: l, key: key}, nil
}

// Key returns the lock's key.
func (m *RWMutex) Key() string { return m.key }

// Locker returns the Locker the RWMutex takes its leases through.
func (m *RWMutex) Locker() *Locker { return m.l }

// RLock takes the read side, waiting while a writer holds the lock or
// waits for it, until ctx ends. ctx, opts and the error are as for
// Locker.Acquire.
func (m *RWMutex) RLock(ctx context.Context, opts ...Option) (*Lease, error) {
	return m.acquire(ctx, opts, backend.Read, true)
}

// TryRLock makes one attempt at the read side: it fails at once with an
// error matching ErrNotAcquired if a writer holds the lock or waits for
// it.
func (m *RWMutex) TryRLock(ctx context.Context, opts ...Option) (*Lease, error) {
	return m.acquire(ctx, opts, backend.Read, false)
}

// Lock takes the write side, waiting until no one else holds either side
// or ctx ends. While it waits, new readers are kept out. When ctx ends
// first nothing of the attempt stays in the store (its waiting mark is
// withdrawn). An owner holding the read side gets ErrUpgrade at once.
func (m *RWMutex) Lock(ctx context.Context, opts ...Option) (*Lease, error) {
	return m.acquire(ctx, opts, backend.Write, true)
}

// TryLock makes one attempt at the write side: it fails at once with an
// error matching ErrNotAcquired if anyone else holds either side, and
// leaves nothing behind (no waiting mark).
func (m *RWMutex) TryLock(ctx context.Context, opts ...Option) (*Lease, error) {
	return m.acquire(ctx, opts, backend.Write, false)
}

func (m *RWMutex) acquire(ctx context.Context, opts []Option, mode backend.Kind, wait bool) (*Lease, error) {
	prim := primRead
	if mode == backend.Write {
		prim = primWrite
	}
	actx, op := m.l.tel.startAcquire(ctx, m.key, wait, prim)
	le, err := m.l.acquireMode(actx, m.key, opts, wait, op.tag(), mode)
	op.end(ctx, le, err)
	return le, err
}
