package memlock

import (
	"context"
	"fmt"
	"time"

	"github.com/distlock/distlock/backend"
)

// Kill cuts the driver off from its store as if its process had died: its
// locks stay until their TTL runs out, its waits fail, and every later call
// fails with an error matching distlock.ErrUnavailable.
func (d *Driver) Kill() {
	d.mu.Lock()
	d.killed = true
	d.unstallLocked()
	d.mu.Unlock()
	d.dropWaiters(fmt.Errorf("memlock: %w: client killed", backend.ErrUnavailable))
	d.endWatches()
}

// Partition cuts the driver off from its store as a network partition
// would, reversibly: its calls fail with an error matching
// distlock.ErrUnavailable while its locks keep expiring in the store, and
// it reports every lock it holds in doubt at once (backend.Request.OnDoubt),
// vouching for each for trustFor from now if trustFor > 0 (a store whose
// clients stop trusting a session early, as ZooKeeper's do), else for what
// its last renewal gave (until zero). Heal ends the partition. Use them to
// test how code behaves while a lease is in doubt.
func (d *Driver) Partition(trustFor time.Duration) {
	var until time.Time
	if trustFor > 0 {
		until = time.Now().Add(trustFor)
	}
	d.s.mu.Lock()
	d.mu.Lock()
	d.partitioned = true
	d.mu.Unlock()
	d.s.mu.Unlock()
	d.endWatches()
	d.held.Doubt(fmt.Errorf("memlock: %w: client partitioned from its store", backend.ErrUnavailable), until)
}

// Stall black-holes the driver's path to its store under a client that
// ignores ctx: every call of d, made now or already waiting to enter the
// store, blocks until Heal (or Kill or Close), whatever its ctx, and then
// runs as if its request had been held in the network: a late answer, taken
// from the store as it is then. Nothing is reported to the portable layer
// (no doubt is pushed): it learns only that its calls do not return. Its
// locks keep expiring in the store meanwhile. Use it to test that leases
// end at their deadline while a driver call is out and never returns (a
// go-redis client without ContextTimeoutEnabled, behind a stalled server,
// waits out its ReadTimeout).
func (d *Driver) Stall() {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.stalled == nil {
		d.stalled = make(chan struct{})
	}
}

// unstallLocked ends a Stall: the calls it held go on. d.mu is held.
func (d *Driver) unstallLocked() {
	if d.stalled != nil {
		close(d.stalled)
		d.stalled = nil
	}
}

// Heal ends a Partition or a Stall and reports contact restored
// (backend.Request.OnRestored) for every lock the driver holds.
func (d *Driver) Heal() {
	d.mu.Lock()
	d.partitioned = false
	d.unstallLocked()
	d.mu.Unlock()
	d.held.Restored()
}

// DropNextReply makes the driver's next request (TryAcquire, Wait,
// Refresh or Release) lose its reply, as a network can: the request takes
// effect in the store, and the call fails with an error matching
// distlock.ErrUnavailable. A lock granted that way is given back by the
// driver before the call returns, as the driver contract asks of an
// acquisition whose outcome the driver could not learn (so no ghost holds
// the key); a Release or Refresh whose reply is lost happened. There is no
// client retry to model: a retry is the caller's own. Dropped counts the
// replies lost.
func (d *Driver) DropNextReply() {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.dropNext = true
}

// Dropped reports how many replies DropNextReply lost.
func (d *Driver) Dropped() int {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.dropped
}

// claimDrop reports whether the call being made loses its reply, and
// disarms DropNextReply if so.
func (d *Driver) claimDrop() bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	if !d.dropNext {
		return false
	}
	d.dropNext = false
	d.dropped++
	return true
}

// answer is err, the answer of a call without a grant, unless the call
// lost its reply (drop: claimDrop, before the call ran).
func answer(drop bool, op string, err error) error {
	if drop {
		return lostReply(op, backend.Grant{})
	}
	return err
}

// answerGrant is the answer of a call that grants (g, or err), unless
// the call lost its reply (drop: claimDrop, before the call ran): then
// what g holds is given back (lostReply). d.s.mu is not held.
func answerGrant(drop bool, op string, g backend.Grant, err error) (backend.Grant, error) {
	if drop {
		return backend.Grant{}, lostReply(op, g)
	}
	if err != nil {
		return backend.Grant{}, err
	}
	return g, nil
}

// lostReply is the error of a call whose reply was lost; a lock it
// granted is given back (owner-checked), as a driver's cleanup would.
func lostReply(op string, g backend.Grant) error {
	if l, ok := g.Lock.(*lock); ok {
		_ = l.Release(context.Background())
	}
	return fmt.Errorf("memlock: %s: %w: reply lost", op, backend.ErrUnavailable)
}
