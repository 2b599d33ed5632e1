package backend

import (
	"context"
	"errors"
	"fmt"
)

// Read-write locks. A store that has them natively declares
// Capabilities.RW (how their waiters wait) and implements RWLocker, plus
// RWNotifier (RW = WaitNotify) or RWWaiter (RW = WaitQueue). The portable
// layer (distlock.RWMutex) does the rest with the machinery of the mutex:
// the Lock values a side grants are renewed, doubted, lost and released
// exactly as a mutex's. A store without them declares nothing, and
// distlock reports ErrUnsupported with the store's name: there is no
// imitation built from mutexes.
//
// A read-write lock named key is not the mutex named key: the two never
// block each other.

// RWMode is a side of a read-write lock.
type RWMode int

const (
	// Read is the shared side: any number of owners hold it together while
	// no owner holds Write.
	Read RWMode = iota + 1
	// Write is the exclusive side: one owner, and no reader.
	Write
)

func (m RWMode) String() string {
	switch m {
	case Read:
		return "read"
	case Write:
		return "write"
	}
	return fmt.Sprintf("RWMode(%d)", int(m))
}

// ErrUpgrade: an owner that holds the read side of a lock asked for its
// write side. Waiting would deadlock (the owner's own read blocks its
// write), so the request is refused: release the read lease, then take
// the write side, and re-read what was read under the read lease.
var ErrUpgrade = errors.New("read-to-write upgrade refused")

// RWLocker is implemented by drivers whose store has read-write locks. A
// driver has them when it implements RWLocker and declares
// Capabilities.RW; either alone means none (see checkRW). Its methods are safe for concurrent use.
//
// The rules every side must keep, which the conformance suite checks:
//
//   - A Write grant excludes every other grant of the key, of either side,
//     to another owner; Read grants to different owners coexist.
//   - Writers are not starved: once an attempt with waiting set has found
//     the write side taken, the store refuses Read to other owners that do
//     not already hold it until that writer is granted, withdraws
//     (WithdrawRW) or stops renewing its attempt for longer than its
//     req.TTL (a crashed waiter blocks readers no longer than a crashed
//     holder would).
//   - A Write grant's Token is strictly greater than every token granted
//     before for the key's read-write lock; a Read grant's Token is the
//     last Write grant's (0 before the first).
//   - Where the store counts holds per owner (CrossProcessReentry), an
//     owner is one holder across Drivers: a second grant of the same side
//     to the same owner is counted (each Lock releases its own), an owner
//     holding Write may also take Read (a reader like any other, which
//     stays if the write is released first), and an owner holding Read
//     that asks for Write gets an error wrapping ErrUpgrade, never a wait.
//     Elsewhere each Driver is its own holder whatever the owner; the
//     portable layer applies these rules within one Locker.
//
// As for Driver.TryAcquire, an attempt that fails leaves nothing behind,
// except the writer-waiting mark described above, and one whose outcome
// is unknown cleans up what it may have created.
type RWLocker interface {
	// TryAcquireRW makes one attempt at the mode side of req.Key's
	// read-write lock, as Driver.TryAcquire does for the mutex. waiting
	// tells a Write attempt that it is part of a wait: if the lock is
	// held it leaves (or renews) the writer-waiting mark. A failed Write
	// attempt with waiting unset (distlock's TryLock) leaves nothing. A
	// Write grant removes the owner's own mark.
	TryAcquireRW(ctx context.Context, req Request, mode RWMode, waiting bool) (Grant, error)
	// WithdrawRW removes the writer-waiting mark req.Owner's attempts left
	// on req.Key, if it is still its own; the portable layer calls it when
	// a wait for the write side ends without a grant. It is harmless when
	// there is no such mark.
	WithdrawRW(ctx context.Context, req Request) error
}

// RWNotifier is implemented by drivers that announce releases of
// read-write locks (Capabilities.RW = WaitNotify), as Notifier does for
// the mutex.
type RWNotifier interface {
	SubscribeRW(ctx context.Context, key string) (released <-chan struct{}, cancel func(), err error)
}

// RWWaiter is implemented by drivers whose store queues the waiters of
// read-write locks (Capabilities.RW = WaitQueue), with the meaning of
// Waiter.Wait for one side. A queued writer blocks every reader that
// queued after it.
type RWWaiter interface {
	WaitRW(ctx context.Context, req Request, mode RWMode) (Grant, error)
}

// checkRW reports an error if c.RW is unknown, or names a wait kind
// whose interface a driver with RWLocker lacks. A driver has read-write
// locks only when it both declares RW and implements RWLocker; either
// alone is not an error: a driver may offer them in some modes only
// (redislock without WaitReplicas), and a wrapper that forwards its inner
// driver's Capabilities (a fault injector, a metrics shim) hides the inner
// RWLocker. The portable layer then reports read-write locks unsupported.
func (c Capabilities) checkRW(d Driver) error {
	_, locker := d.(RWLocker)
	_, notifier := d.(RWNotifier)
	_, waiter := d.(RWWaiter)
	switch c.RW {
	case "":
		return nil
	case WaitPoll, WaitNotify, WaitQueue:
	default:
		return fmt.Errorf("backend: %s: unknown rw wait kind %q", c.Name, c.RW)
	}
	switch {
	case !locker:
		return nil
	case c.RW == WaitNotify && !notifier:
		return fmt.Errorf("backend: %s: capabilities say rw=notify but the driver has no SubscribeRW method", c.Name)
	case c.RW == WaitQueue && !waiter:
		return fmt.Errorf("backend: %s: capabilities say rw=queue but the driver has no WaitRW method", c.Name)
	}
	return nil
}
