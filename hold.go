package distlock

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/distlock/distlock/backend"
)

// A hold is one owner's hold on one key through this Locker. Re-entries
// share it: it counts its Leases and is released in the store when the
// last one is released.
type hold struct {
	key, owner string
	mode       backend.Kind // Exclusive (0) for the mutex and for permits; a side of a read-write lock (rwmutex.go)

	// Guarded by Locker.mu.
	state     holdState
	ready     chan struct{} // made by the first caller to wait (waitChan), closed by resolve
	leases    *Lease        // the first of its Leases, linked by Lease.next; nil: none
	first     Lease         // the hold's first Lease, made with it: one allocation, not two
	grant     backend.Grant
	ttl       time.Duration // the TTL renewals ask for; only grows
	autoRenew bool
	deadline  time.Time // client-side validity: reported lost at this instant
	nextRenew time.Time
	renewing  bool      // a renewal is in flight (the hold waits on the heap for its deadline only)
	renewAt   time.Time // when the renewal in flight was collected
	early     error     // loss reported by the driver before the grant was recorded
	heapIndex int
	doubt     doubtState    // doubt.go
	tel       holdTelemetry // observe.go
	permits   int           // > 0: a semaphore's permits (semaphore.go), never re-entered
	onEnd     []func()      // called when the hold ends (re-entries' extensions in flight)
}

type holdKey struct {
	key, owner string
	mode       backend.Kind
}

func (h *hold) hk() holdKey { return holdKey{h.key, h.owner, h.mode} }

// newHold returns a pending hold; tag is its WithKeyAttribute label and
// primitive. Its ready channel and its list of Leases cost nothing until
// used.
func newHold(hk holdKey, tag holdTag) *hold {
	h := &hold{key: hk.key, owner: hk.owner, mode: hk.mode, heapIndex: -1}
	h.tel.label, h.tel.prim = tag.label, tag.prim
	return h
}

// waitChan returns the channel closed when h's acquisition or release in
// the store resolves, made now if no one waits yet. Locker.mu is held.
func (h *hold) waitChan() <-chan struct{} {
	if h.ready == nil {
		h.ready = make(chan struct{})
	}
	return h.ready
}

// resolve wakes the callers waiting for h's acquisition or release in the
// store to resolve. Locker.mu is held.
func (h *hold) resolve() {
	if h.ready != nil {
		close(h.ready)
		h.ready = nil
	}
}

type holdState int

const (
	holdPending holdState = iota
	holdHeld
	holdEnded
)

// claim either re-enters an existing hold (returning its new Lease), or
// registers a pending hold for the caller to acquire in the store. Callers
// with the same owner and key wait for a pending acquisition to resolve, so
// a store never sees one owner queue behind itself.
func (l *Locker) claim(ctx context.Context, hk holdKey, ttl time.Duration, c acquireConfig, tag holdTag) (*hold, *Lease, error) {
	for {
		l.mu.Lock()
		if hk.mode != backend.Exclusive {
			switch le, next, err := l.claimRW(ctx, hk, ttl, c); next {
			case rwDone:
				return nil, le, err
			case rwRetry:
				continue
			}
		}
		h := l.holds[hk]
		if h == nil {
			h = newHold(hk, tag)
			l.holds[hk] = h
			l.mu.Unlock()
			return h, nil, nil
		}
		if h.permits > 0 {
			l.mu.Unlock()
			return nil, nil, permitOwnerErr(hk)
		}
		if h.state == holdHeld {
			l.mu.Unlock()
			le, err := l.reenter(ctx, h, ttl, c)
			if errors.Is(err, errHoldEnded) {
				continue // released or lost meanwhile: acquire afresh
			}
			return nil, le, err
		}
		// Pending, or ended and being released in the store: wait until
		// that resolves.
		ready := h.waitChan()
		l.mu.Unlock()
		select {
		case <-ready:
		case <-ctx.Done():
			return nil, nil, fmt.Errorf("distlock: acquire %q: %w", hk.key, context.Cause(ctx))
		}
	}
}

// errHoldEnded tells claim that the hold it found held ended before a
// re-entry could join it (its last Lease was released, or it was lost).
var errHoldEnded = errors.New("distlock: hold ended during re-entry")

func (l *Locker) ended(h *hold) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return h.state == holdEnded
}

// reenter adds a Lease to a held hold. A longer TTL or auto-renewal extends
// the hold; nothing a re-entry asks for shortens it.
func (l *Locker) reenter(ctx context.Context, h *hold, ttl time.Duration, c acquireConfig) (*Lease, error) {
	if l.endIfPastDeadline(h) {
		return nil, errHoldEnded // its validity ran out before the watchdog ended it
	}
	l.mu.Lock()
	longer := l.caps.PerLockTTL && ttl > h.ttl
	lock := h.grant.Lock
	l.mu.Unlock()
	if longer {
		// The extension ends with the hold too: a hold lost while the
		// driver has not answered returns at once, whatever the driver
		// does with ctx.
		rctx, cancel := context.WithCancelCause(ctx)
		l.mu.Lock()
		if h.state != holdHeld {
			l.mu.Unlock()
			cancel(nil)
			return nil, errHoldEnded
		}
		h.onEnd = append(h.onEnd, func() { cancel(errHoldEnded) })
		l.mu.Unlock()
		sent, err := l.refreshHold(rctx, h, lock, ttl)
		cancel(nil)
		if err != nil {
			l.refreshFailed(h, err)
			if l.ended(h) {
				return nil, errHoldEnded
			}
			return nil, fmt.Errorf("distlock: re-enter %q: extend to %v: %w", h.key, ttl, err)
		}
		l.extended(h, sent, ttl)
	}
	l.mu.Lock()
	if h.state != holdHeld || !time.Now().Before(h.deadline) {
		l.mu.Unlock()
		l.endIfPastDeadline(h) // never a Lease on a hold past its validity
		return nil, errHoldEnded
	}
	defer l.mu.Unlock()
	if !c.noRenew && !h.autoRenew {
		h.autoRenew = true
		l.wd.reschedule(h)
	}
	return l.newLease(ctx, h), nil
}

// newLease makes a Lease on h. Locker.mu is held.
func (l *Locker) newLease(ctx context.Context, h *hold) *Lease {
	le := &h.first
	if le.h != nil { // the first is taken: a re-entry
		le = new(Lease)
	}
	*le = Lease{l: l, h: h, parent: leaseBase(ctx), next: h.leases}
	if h.leases != nil {
		h.leases.prev = le
	}
	h.leases = le
	return le
}

// What claimRW tells claim to do.
type rwNext int

const (
	rwProceed rwNext = iota // no rule applies: claim as for the mutex (Locker.mu still held)
	rwDone                  // return the Lease or error given (Locker.mu released)
	rwRetry                 // look again (Locker.mu released)
)

// claimRW applies the rules between one owner's two sides of a key, for
// claim: a read by the write holder re-enters the write hold; a write by
// an owner holding or acquiring the read side is an upgrade, refused.
// Locker.mu is held on entry.
func (l *Locker) claimRW(ctx context.Context, hk holdKey, ttl time.Duration, c acquireConfig) (*Lease, rwNext, error) {
	other := hk
	other.mode = backend.Write
	if hk.mode == backend.Write {
		other.mode = backend.Read
	}
	h := l.holds[other]
	switch {
	case h == nil:
		return nil, rwProceed, nil
	case hk.mode == backend.Read && h.state == holdHeld:
		l.mu.Unlock()
		le, err := l.reenter(ctx, h, ttl, c)
		if errors.Is(err, errHoldEnded) {
			return nil, rwRetry, nil
		}
		return le, rwDone, err
	case hk.mode == backend.Write && h.state != holdEnded:
		l.mu.Unlock()
		return nil, rwDone, fmt.Errorf("distlock: lock %q: %w: owner %s holds or is taking the read side; release it, then take the write side", hk.key, ErrUpgrade, hk.owner)
	}
	ready := h.waitChan() // the other side is being acquired or released
	l.mu.Unlock()
	select {
	case <-ready:
		return nil, rwRetry, nil
	case <-ctx.Done():
		return nil, rwDone, fmt.Errorf("distlock: acquire %q: %w", hk.key, context.Cause(ctx))
	}
}

// permitOwnerErr refuses to take a lock under an owner that holds a
// semaphore's permits of the same name (an Acquire with a permit Lease's
// Context): a permit is not that lock, and cannot be re-entered.
func permitOwnerErr(hk holdKey) error {
	return fmt.Errorf("distlock: acquire %q: %w: owner %q holds permits of the semaphore %q, which is not the lock of that name; acquire the lock under another owner", hk.key, ErrInvalidConfig, hk.owner, hk.key)
}
