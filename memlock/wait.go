package memlock

import (
	"context"
	"fmt"
	"time"

	"github.com/distlock/distlock/backend"
)

type waiter struct {
	d       *Driver
	e       *entry
	owner   string
	ttl     time.Duration
	hooks   backend.Hooks
	granted chan backend.Grant // buffered: the store never blocks on it
	gone    chan error         // buffered: the driver was killed or closed
}

// Wait implements backend.Waiter for the mutex: a FIFO queue per key in
// the store.
func (d *Driver) Wait(ctx context.Context, req backend.Request) (backend.Grant, error) {
	if req.Kind != backend.Exclusive {
		return backend.Grant{}, backend.UnsupportedKind("memlock", "wait", req.Kind)
	}
	if d.wait != backend.WaitQueue {
		return backend.Grant{}, fmt.Errorf("memlock: wait: %w: driver made with Wait=%s", backend.ErrUnsupported, d.wait)
	}
	if err := d.enter(ctx, "wait"); err != nil {
		return backend.Grant{}, err
	}
	drop := d.claimDrop()
	now := time.Now()
	e := d.s.lookup(req.Key, now, true)
	if len(e.waiters) == 0 {
		if g, ok := d.s.take(e, req.Owner, req.TTL, now); ok {
			d.grantLocked(&g, req.Key, req.Owner, req.Hooks())
			d.s.mu.Unlock()
			return answerGrant(drop, "wait", g, nil)
		}
	}
	w := &waiter{d: d, e: e, owner: req.Owner, ttl: req.TTL, hooks: req.Hooks(), granted: make(chan backend.Grant, 1), gone: make(chan error, 1)}
	e.waiters = append(e.waiters, w)
	d.s.armTimer(e)
	d.mu.Lock()
	d.queued[w] = struct{}{}
	d.mu.Unlock()
	d.s.mu.Unlock()

	select {
	case g := <-w.granted:
		d.forget(w)
		return answerGrant(drop, "wait", g, nil)
	case err := <-w.gone:
		select {
		case g := <-w.granted: // granted just before the driver went away
			_ = g.Lock.Release(context.Background())
		default:
		}
		return backend.Grant{}, fmt.Errorf("memlock: wait: %w", err)
	case <-ctx.Done():
		return backend.Grant{}, d.cancelWait(e, w, ctx)
	}
}

// cancelWait leaves the queue; a grant that raced with the cancel is
// released, so nothing of the attempt stays behind.
func (d *Driver) cancelWait(e *entry, w *waiter, ctx context.Context) error {
	d.s.mu.Lock()
	d.s.dequeueLocked(e, w)
	d.s.mu.Unlock()
	d.forget(w)
	select {
	case g := <-w.granted:
		_ = g.Lock.Release(context.Background())
	default:
	}
	return fmt.Errorf("memlock: wait: %w", ctx.Err())
}

func (d *Driver) forget(w *waiter) {
	d.mu.Lock()
	delete(d.queued, w)
	d.mu.Unlock()
}

func (s *Store) dequeueLocked(e *entry, w *waiter) {
	for i, x := range e.waiters {
		if x == w {
			e.waiters = append(e.waiters[:i:i], e.waiters[i+1:]...)
			break
		}
	}
	s.gc(e)
}
