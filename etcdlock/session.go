package etcdlock

import (
	"context"
	"errors"
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

// setDoubt asks for the session's locks to be put in doubt (cause not nil,
// vouched for until until) or told that contact is back (nil), and returns
// at once. Pushing to many locks takes time (at 80k locks, 6.5 s was
// measured on a loaded machine, each lock's OnDoubt taking its Locker's
// lock): done on the keepalive's goroutine, it stopped the keepalives for
// that long, and the session was lost though the server answered them.
func (s *session) setDoubt(cause error, until time.Time) {
	s.pushMu.Lock()
	s.pushDoubt, s.pushUntil = cause, until
	s.pushMu.Unlock()
	select {
	case s.pushKick <- struct{}{}:
	default:
	}
}

// pushDoubts pushes the doubt setDoubt asks for until s ends or the driver
// closes, in the order asked. Changes that come faster than they can be
// pushed are coalesced to the latest: a doubt cleared before it was pushed
// is not pushed (a keepalive confirmed the lease meanwhile).
func (d *Driver) pushDoubts(s *session) {
	for {
		select {
		case <-s.pushKick:
		case <-s.done:
			return
		case <-d.ctx.Done():
			return
		}
		s.pushMu.Lock()
		cause, until := s.pushDoubt, s.pushUntil
		s.pushMu.Unlock()
		switch {
		case cause == nil:
			s.held.Restored()
		case !s.held.InDoubt():
			s.held.Doubt(cause, until)
		}
	}
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
	d.wg.Add(2)
	d.mu.Unlock()
	go func() {
		defer d.wg.Done()
		d.keepAlive(s)
	}()
	go func() {
		defer d.wg.Done()
		d.pushDoubts(s)
	}()
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

// maxKeepalivesInFlight bounds the keepalives one session has sent and
// not yet seen answered.
const maxKeepalivesInFlight = 3

// keepAlive renews s until it is lost or the driver closes.
//
// A renewal is due a third of the TTL after the send time of the last
// confirmed one. Each keepalive may take until the lease's validity runs
// out: the server renews the lease when it receives it, so a late answer
// still confirms the lease from the send time on, and a slow but alive
// server (a keepalive queued behind writes) keeps it. A keepalive
// unanswered for a sixth of the TTL puts the locks in doubt (a failed one
// at once), and another is sent beside it, up to maxKeepalivesInFlight, so
// that one lost request or stuck stream does not cost the lease either.
// When the validity runs out with none confirmed, the session is lost.
func (d *Driver) keepAlive(s *session) {
	interval := s.ttl / 3
	unanswered := max(s.ttl/6, 100*time.Millisecond)
	ctx, cancel := context.WithCancel(d.ctx)
	var wg sync.WaitGroup
	defer func() {
		cancel()
		wg.Wait()
	}()
	type result struct {
		sent time.Time
		err  error
	}
	results := make(chan result, maxKeepalivesInFlight)
	inFlight := 0
	send := func() {
		inFlight++
		sent := time.Now()
		until := s.validUntil()
		wg.Go(func() { results <- result{sent, d.renew(ctx, s, sent, until)} })
	}
	var round time.Time // send time of the current round's first keepalive; zero between rounds
	var lastErr error
	doubted := false // doubt asked for (setDoubt) and not cleared since
	timer := time.NewTimer(interval)
	defer timer.Stop()
	for {
		select {
		case <-d.ctx.Done():
			return
		case <-s.done:
			return
		case r := <-results:
			inFlight--
			switch {
			case r.err == nil:
				if doubted {
					doubted = false
					s.setDoubt(nil, time.Time{})
				}
				if !round.IsZero() {
					round, lastErr = time.Time{}, nil
					timer.Reset(max(time.Until(s.confirmedAt().Add(interval)), 0))
				}
			case r.sent.Before(s.confirmedAt()):
				// A later keepalive worked: this one's failure is stale.
			case errors.Is(r.err, backend.ErrNotHeld):
				d.loseSession(s, r.err)
				return
			case time.Now().After(s.validUntil()):
				d.loseSession(s, fmt.Errorf("not renewed within its TTL %v: %w", s.ttl, r.err))
				return
			default:
				// The lease may still live on the server until validUntil:
				// the locks are in doubt until then (or until a renewal works).
				lastErr = r.err
				until := s.validUntil()
				if !doubted {
					doubted = true
					s.setDoubt(fmt.Errorf("etcdlock: lease %x renewal failed: %w", int64(s.id), r.err), until)
				}
				timer.Reset(max(min(interval, time.Until(until))/2, 10*time.Millisecond))
			}
		case <-timer.C:
			until := s.validUntil()
			switch {
			case time.Now().After(until):
				cause := lastErr
				if cause == nil {
					cause = fmt.Errorf("%d keepalive(s) unanswered", inFlight)
				}
				d.loseSession(s, fmt.Errorf("not renewed within its TTL %v: %w", s.ttl, cause))
				return
			case round.IsZero():
				round = time.Now()
				send()
			default:
				// Unanswered for a sixth of the TTL (or failed): in doubt,
				// and another keepalive beside the ones still out.
				if !doubted {
					doubted = true
					s.setDoubt(fmt.Errorf("etcdlock: lease %x renewal unanswered for %v", int64(s.id), time.Since(round).Round(time.Millisecond)), until)
				}
				if inFlight < maxKeepalivesInFlight {
					send()
				}
			}
			timer.Reset(max(min(unanswered, time.Until(until)), time.Millisecond))
		}
	}
}

// renew sends one keepalive for s, sent at sent, bounded by until (the
// lease's validity when it was sent): an answer after that could not
// confirm anything the session has not already given up.
func (d *Driver) renew(ctx context.Context, s *session, sent, until time.Time) error {
	ctx, cancel := context.WithDeadline(ctx, until)
	defer cancel()
	if _, err := d.c.KeepAliveOnce(ctx, s.id); err != nil {
		return d.wrap(ctx, "renew lease for", d.prefix, err)
	}
	s.confirmed(sent)
	return nil
}

// renewNow confirms s with one keepalive before a grant, bounded by a
// sixth of the TTL (and the lease's validity) so that the acquisition
// does not wait long on it; on failure the older confirmation stands.
func (d *Driver) renewNow(s *session) {
	sent := time.Now()
	_ = d.renew(d.ctx, s, sent, earliest(s.validUntil(), sent.Add(max(s.ttl/6, 100*time.Millisecond))))
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
	if d.closed {
		return
	}
	d.wg.Add(1)
	go func() {
		defer d.wg.Done()
		d.revoke(id)
	}()
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
