package etcdlock

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/distlock/distlock/backend"
)

// A session's keepalive: its renewals, and the doubt they push to the
// session's locks when they fail or go unanswered.

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
	ctx, cancel := context.WithCancel(d.ctx)
	k := &keeper{
		d: d, s: s, ctx: ctx,
		interval:   s.ttl / 3,
		unanswered: max(s.ttl/6, 100*time.Millisecond),
		results:    make(chan keepResult, maxKeepalivesInFlight),
	}
	defer func() {
		cancel()
		k.wg.Wait()
	}()
	k.timer = time.NewTimer(k.interval)
	defer k.timer.Stop()
	for {
		select {
		case <-d.ctx.Done():
			return
		case <-s.done:
			return
		case r := <-k.results:
			if k.answered(r) {
				return
			}
		case <-k.timer.C:
			if k.due() {
				return
			}
		}
	}
}

// keeper is the state of one session's keepAlive.
type keeper struct {
	d          *Driver
	s          *session
	ctx        context.Context // the keepalives', ended when keepAlive returns
	interval   time.Duration   // from a confirmed renewal to the next one
	unanswered time.Duration   // how long a keepalive goes unanswered before doubt
	timer      *time.Timer
	wg         sync.WaitGroup
	results    chan keepResult
	inFlight   int
	round      time.Time // send time of the current round's first keepalive; zero between rounds
	lastErr    error
	doubted    bool // doubt asked for (setDoubt) and not cleared since
}

// keepResult is a keepalive's outcome.
type keepResult struct {
	sent time.Time
	err  error
}

// send sends one more keepalive.
func (k *keeper) send() {
	d, s, ctx := k.d, k.s, k.ctx
	k.inFlight++
	sent := time.Now()
	until := s.validUntil()
	k.wg.Go(func() { k.results <- keepResult{sent, d.renew(ctx, s, sent, until)} })
}

// answered takes keepalive result r; true if the session is lost.
func (k *keeper) answered(r keepResult) bool {
	d, s := k.d, k.s
	k.inFlight--
	switch {
	case r.err == nil:
		if k.doubted {
			k.doubted = false
			s.setDoubt(nil, time.Time{})
		}
		if !k.round.IsZero() {
			k.round, k.lastErr = time.Time{}, nil
			k.timer.Reset(max(time.Until(s.confirmedAt().Add(k.interval)), 0))
		}
	case r.sent.Before(s.confirmedAt()):
		// A later keepalive worked: this one's failure is stale.
	case errors.Is(r.err, backend.ErrNotHeld):
		d.loseSession(s, r.err)
		return true
	case time.Now().After(s.validUntil()):
		d.loseSession(s, fmt.Errorf("not renewed within its TTL %v: %w", s.ttl, r.err))
		return true
	default:
		// The lease may still live on the server until validUntil:
		// the locks are in doubt until then (or until a renewal works).
		k.lastErr = r.err
		until := s.validUntil()
		if !k.doubted {
			k.doubted = true
			s.setDoubt(fmt.Errorf("etcdlock: lease %x renewal failed: %w", int64(s.id), r.err), until)
		}
		k.timer.Reset(max(min(k.interval, time.Until(until))/2, 10*time.Millisecond))
	}
	return false
}

// due acts when the timer fires: a renewal round starts, or another
// keepalive goes out beside those unanswered; true if the session is lost.
func (k *keeper) due() bool {
	d, s := k.d, k.s
	until := s.validUntil()
	switch {
	case time.Now().After(until):
		cause := k.lastErr
		if cause == nil {
			cause = fmt.Errorf("%d keepalive(s) unanswered", k.inFlight)
		}
		d.loseSession(s, fmt.Errorf("not renewed within its TTL %v: %w", s.ttl, cause))
		return true
	case k.round.IsZero():
		k.round = time.Now()
		k.send()
	default:
		// Unanswered for a sixth of the TTL (or failed): in doubt,
		// and another keepalive beside the ones still out.
		if !k.doubted {
			k.doubted = true
			s.setDoubt(fmt.Errorf("etcdlock: lease %x renewal unanswered for %v", int64(s.id), time.Since(k.round).Round(time.Millisecond)), until)
		}
		if k.inFlight < maxKeepalivesInFlight {
			k.send()
		}
	}
	k.timer.Reset(max(min(k.unanswered, time.Until(until)), time.Millisecond))
	return false
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
