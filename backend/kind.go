package backend

import (
	"errors"
	"fmt"
)

// Kind is what a Request asks for. Every kind is granted through the same
// calls (Driver.TryAcquire, Waiter.Wait, Notifier.Subscribe,
// Inspector.Inspect), and every grant is one Lock, refreshed and released
// as one, with the guarantees of a lock: its expiry set in the same atomic
// step as the take, owner-checked Refresh and Release,
// OnLost/OnDoubt/OnRestored as for the mutex, and the cleanup rules of
// Driver.TryAcquire when an outcome is unknown. What differs between kinds
// is only who may hold together and what the fencing token counts, below.
//
// A driver declares, per kind, whether it grants it and how its waiters
// wait (Capabilities.WaitFor); the portable layer does the rest with the
// machinery of the mutex. A store without a kind declares nothing for it,
// and distlock reports ErrUnsupported with the store's name: there is no
// imitation of a semaphore or a read-write lock built from mutexes (its
// tokens could not be ordered per semaphore, see docs/primitives.md).
type Kind uint8

const (
	// Exclusive is the mutex: one owner at a time. Grant.Token is strictly
	// greater than every token granted before for the key. Where the
	// store counts holds per owner (CrossProcessReentry), a key held by
	// req.Owner is granted again and counted.
	Exclusive Kind = iota
	// Read is the shared side of a read-write lock: any number of owners
	// hold it together while no owner holds Write. Grant.Token is the
	// last Write grant's (0 before the first).
	//
	// Writers are not starved: once a Write attempt with Request.Waiting
	// set has found the lock taken, the store refuses Read to other
	// owners that do not already hold it until that writer is granted,
	// withdraws (Notifier.Withdraw) or stops renewing its attempt for longer than
	// its TTL (a crashed waiter blocks readers no longer than a crashed
	// holder would). A queued writer (Waiter) blocks every reader that
	// queued after it.
	//
	// Where the store counts holds per owner (CrossProcessReentry), an
	// owner is one holder across Drivers: a second grant of the same side
	// to the same owner is counted (each Lock releases its own), an owner
	// holding Write may also take Read (a reader like any other, which
	// stays if the write is released first), and an owner holding Read
	// that asks for Write gets an error wrapping ErrUpgrade, never a wait.
	// Elsewhere each Driver is its own holder whatever the owner; the
	// portable layer applies these rules within one Locker.
	Read
	// Write is the exclusive side of a read-write lock: one owner, and no
	// reader. Grant.Token is strictly greater than every token granted
	// before for the key's read-write lock. Read and Write name the two
	// sides of one lock: Subscribe and Inspect treat them alike.
	Write
	// Permits is Request.Permits permits of the counting semaphore
	// Request.Key, of Request.Limit permits. Grant.Token is strictly
	// greater than every token granted before for the semaphore, to any
	// holder.
	//
	// When acquirers disagree on Limit, each grant is decided against the
	// acquirer's own Limit: permits are granted only while the permits
	// held (by every holder, counting expired ones as free) plus Permits
	// are at most Limit. Holders are never evicted: after Limit is
	// lowered, the permits already held above it stay held until
	// released or expired. A refused attempt's NotAcquiredError carries,
	// ideally, when the first held permit expires.
	Permits
)

// kinds is every Kind, in order.
var kinds = [...]Kind{Exclusive, Read, Write, Permits}

func (k Kind) String() string {
	switch k {
	case Exclusive:
		return "exclusive"
	case Read:
		return "read"
	case Write:
		return "write"
	case Permits:
		return "permits"
	}
	return fmt.Sprintf("Kind(%d)", int(k))
}

// MaxSemaphoreLimit is the largest number of permits a semaphore may
// have. It keeps a store's count of permits (and a client's sum of them)
// far from any integer limit.
const MaxSemaphoreLimit = 1 << 20

// ErrUpgrade: an owner that holds the read side of a lock asked for its
// write side. Waiting would deadlock (the owner's own read blocks its
// write), so the request is refused: release the read lease, then take
// the write side, and re-read what was read under the read lease.
var ErrUpgrade = errors.New("read-to-write upgrade refused")

// UnsupportedKind returns the error a driver named name (its
// Capabilities.Name) gives for a request of a kind it does not serve in
// the call op ("acquire", "wait", "subscribe", "inspect"): it matches
// ErrUnsupported.
func UnsupportedKind(name, op string, k Kind) error {
	return fmt.Errorf("%s: %s: %w: no %s grants in this store", name, op, ErrUnsupported, k)
}
