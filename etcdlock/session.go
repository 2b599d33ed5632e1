package etcdlock

import (
	"context"
	"fmt"
	"math/bits"
	"sync"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/distlock/distlock/backend"
)

// A session is one etcd lease shared by every lock and waiter of a Driver.
// One goroutine keeps it alive with KeepAliveOnce at a third of its TTL,
// recording the send time of each confirmed renewal (see keepAlive). A
// renewal that fails, or goes unanswered for a sixth of the TTL,
// puts the session's locks in doubt at once (Request.OnDoubt, vouched for
// until the lease's earliest expiry); the next one that works says contact
// is back (Request.OnRestored). When the server says
// the lease is gone, or no renewal was confirmed for a whole TTL, the
// session is lost: done closes and every lock on it is reported lost. The
// driver then grants a new lease for later acquisitions.
type session struct {
	id   clientv3.LeaseID
	ttl  time.Duration
	done chan struct{} // closed when lost

	held backend.HeldSet[*lock] // the locks on it; in doubt while renewals fail

	mu        sync.Mutex
	lastAlive time.Time         // send time of the last confirmed grant or renewal
	err       error             // why it was lost
	slots     map[string]uint64 // per lock key, the name slots in use (see takeSlot)
	spill     uint64            // names handed out past the 64 slots of a key

	// The doubt the keepalive wants pushed to the locks (nil: contact is
	// back), pushed by its own goroutine (pushDoubts).
	pushMu    sync.Mutex
	pushDoubt error
	pushUntil time.Time
	pushKick  chan struct{} // capacity 1
}

// Name slots. Each acquisition's etcd key is named after the session's
// lease and a slot, the lowest slot of that lock key not in use by the
// session: one at a time, slot 0 again and again. Reusing names keeps
// deleted keys, which every read of the queue visits until compaction,
// from piling up in a busy lock's range (figures in docs/etcd.md, Keys).
//
// A slot is in use from takeSlot until the key of its name is known gone
// with no request in flight that could delete a later key of the same
// name (freeSlot). A slot whose key's fate is unknown (a put or delete
// with no answer) stays in use for the session's life. With a key's 64
// slots in use, takeSlot hands out names never used before.
const slotsPerKey = 64

// takeSlot returns a name slot for an acquisition of key.
func (s *session) takeSlot(key string) uint64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	used := s.slots[key]
	if used == ^uint64(0) {
		s.spill++
		return slotsPerKey - 1 + s.spill
	}
	i := uint64(bits.TrailingZeros64(^used))
	if s.slots == nil {
		s.slots = map[string]uint64{}
	}
	s.slots[key] = used | 1<<i
	return i
}

// freeSlot makes slot of key reusable (see takeSlot).
func (s *session) freeSlot(key string, slot uint64) {
	if slot >= slotsPerKey {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if used := s.slots[key] &^ (1 << slot); used == 0 {
		delete(s.slots, key)
	} else {
		s.slots[key] = used
	}
}

// validUntil is the earliest the server can let the lease expire.
func (s *session) validUntil() time.Time {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.lastAlive.Add(s.ttl)
}

// confirmed records that a renewal sent at sent succeeded.
func (s *session) confirmed(sent time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if sent.After(s.lastAlive) {
		s.lastAlive = sent
	}
}

func (s *session) confirmedAt() time.Time {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.lastAlive
}

// lost reports whether the session ended.
func (s *session) lost() bool {
	select {
	case <-s.done:
		return true
	default:
		return false
	}
}

// cause returns why the session ended.
func (s *session) cause() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.err
}

// end marks the session lost with cause; false if it already was.
func (s *session) end(cause error) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.err != nil {
		return false
	}
	s.err = fmt.Errorf("%w: lease %x: %w", errSessionLost, int64(s.id), cause)
	close(s.done)
	return true
}

// session returns the driver's live session, granting a new lease when
// there is none or the last one ended.
func (d *Driver) session(ctx context.Context) (*session, error) {
	if s := d.liveSession(); s != nil {
		return s, nil
	}
	select {
	case d.grantSem <- struct{}{}:
		defer func() { <-d.grantSem }()
	case <-ctx.Done():
		return nil, fmt.Errorf("etcdlock: grant lease: %w", context.Cause(ctx))
	}
	if s := d.liveSession(); s != nil {
		return s, nil
	}
	if d.isClosed() {
		return nil, fmt.Errorf("etcdlock: grant lease: %w", backend.ErrClosed)
	}
	sent := time.Now()
	resp, err := d.c.Grant(ctx, int64(d.ttl/time.Second))
	if err != nil {
		return nil, d.wrap(ctx, "grant lease for", d.prefix, err)
	}
	s := &session{
		id: resp.ID, ttl: time.Duration(resp.TTL) * time.Second,
		done: make(chan struct{}), lastAlive: sent, pushKick: make(chan struct{}, 1),
	}
	d.mu.Lock()
	if d.closed {
		d.mu.Unlock()
		d.revoke(s.id)
		return nil, fmt.Errorf("etcdlock: grant lease: %w", backend.ErrClosed)
	}
	d.sess = s
	d.wg.Go(func() { d.keepAlive(s) })
	d.wg.Go(func() { d.pushDoubts(s) })
	d.mu.Unlock()
	return s, nil
}

// liveSession returns the current session if it has not ended.
func (d *Driver) liveSession() *session {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.sess != nil && !d.sess.lost() {
		return d.sess
	}
	return nil
}

// loseSession ends s, reports every lock on it lost, and revokes the lease
// in the background in case the server still has it.
func (d *Driver) loseSession(s *session, cause error) {
	if !s.end(cause) {
		return
	}
	d.mu.Lock()
	if d.sess == s {
		d.sess = nil
	}
	d.mu.Unlock()
	for _, l := range s.held.Lost(fmt.Errorf("etcdlock: %w: %w", backend.ErrLost, s.cause())) {
		l.forgetToken()
	}
	d.revokeAsync(s.id)
}

// revokeAsync revokes a lease in an owned goroutine, best effort.
func (d *Driver) revokeAsync(id clientv3.LeaseID) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if !d.closed {
		d.wg.Go(func() { d.revoke(id) })
	}
}

// revoke revokes a lease, best effort, within a second.
func (d *Driver) revoke(id clientv3.LeaseID) {
	ctx, cancel := context.WithTimeout(d.ctx, time.Second)
	defer cancel()
	_, _ = d.c.Revoke(ctx, id)
}

// earliest returns the earlier of a and b.
func earliest(a, b time.Time) time.Time {
	if b.Before(a) {
		return b
	}
	return a
}
