package memlock

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/distlock/distlock/backend"
)

// Options configure a Driver. The zero value is ready to use.
type Options struct {
	// Wait picks how waiters wait: backend.WaitNotify (default: sleep until
	// a release is announced), backend.WaitQueue (a FIFO queue in the
	// store: fair), or backend.WaitPoll (retry with backoff). All three
	// exist so each waiting path of the portable layer can be tested.
	Wait backend.WaitKind
}

// A Driver is one client of a Store, implementing backend.Driver (and
// backend.Waiter, backend.Notifier, backend.Inspector, backend.Batcher for
// TryAcquireMulti, and backend.Announcer). Use it with distlock.New.
type Driver struct {
	routes // the entry points (kinds.go)

	s    *Store
	wait backend.WaitKind

	mu          sync.Mutex
	killed      bool
	closed      bool
	partitioned bool
	stalled     chan struct{} // Stall: closed by Heal, Kill or Close; nil: not stalled
	dropNext    bool          // DropNextReply armed
	dropped     int
	subs        map[*subscription]struct{}
	queued      map[*waiter]struct{}
	held        backend.HeldSet[*lock] // locks granted through d and not released
}

// NewDriver returns a client of s. opts may be nil.
func (s *Store) NewDriver(opts *Options) (*Driver, error) {
	var o Options
	if opts != nil {
		o = *opts
	}
	switch o.Wait {
	case "":
		o.Wait = backend.WaitNotify
	case backend.WaitNotify, backend.WaitQueue, backend.WaitPoll:
	default:
		return nil, fmt.Errorf("memlock: %w: unknown wait kind %q (want poll, notify or queue)", backend.ErrInvalidConfig, o.Wait)
	}
	d := &Driver{s: s, wait: o.Wait, subs: map[*subscription]struct{}{}, queued: map[*waiter]struct{}{}}
	d.routes = byKind.Notifying(d)
	return d, nil
}

// Capabilities implements backend.Driver.
func (d *Driver) Capabilities() backend.Capabilities {
	return backend.Capabilities{
		Name:                "mem",
		Wait:                d.wait,
		Lifetime:            backend.LifetimeTTL,
		PerLockTTL:          true,
		MinTTL:              time.Millisecond,
		MaxTTL:              backend.TTLLimit,
		Fair:                d.wait == backend.WaitQueue,
		CrossProcessReentry: true,
		Replication:         "none (one process)",
		Semaphore:           d.semaphoreWait(),
		RW:                  d.rwWait(),
		MultiAtomic:         true, // multi.go
		Values:              true, // announce.go
		Watch:               true,
		Inspect:             true, // inspect.go
		ForceRelease:        true, // force.go
	}
}

// grantLocked makes the lock of a grant to d and tracks it. d.s.mu is held.
func (d *Driver) grantLocked(g *backend.Grant, key, owner string, h backend.Hooks) {
	l := &lock{d: d, key: key, owner: owner, token: g.Token}
	g.Lock = l
	_ = d.held.Track(l, h) // the set never ends
}

// Close implements backend.Driver: waits of this driver end with ErrClosed.
// Locks it still holds stay until their TTL runs out.
func (d *Driver) Close() error {
	d.mu.Lock()
	d.closed = true
	d.unstallLocked()
	d.mu.Unlock()
	d.dropWaiters(fmt.Errorf("memlock: %w", backend.ErrClosed))
	d.s.mu.Lock()
	defer d.s.mu.Unlock()
	d.mu.Lock()
	defer d.mu.Unlock()
	for sub := range d.subs {
		d.s.unsubscribeLocked(sub)
		if sub.watch {
			close(sub.ch)
		}
	}
	clear(d.subs)
	return nil
}

// endWatches ends d's watches (announce.go): their channels are closed.
func (d *Driver) endWatches() {
	d.s.mu.Lock()
	defer d.s.mu.Unlock()
	d.mu.Lock()
	defer d.mu.Unlock()
	for sub := range d.subs {
		if sub.watch {
			delete(d.subs, sub)
			d.s.unsubscribeLocked(sub)
			close(sub.ch)
		}
	}
}

func (d *Driver) dropWaiters(err error) {
	d.s.mu.Lock()
	defer d.s.mu.Unlock()
	d.mu.Lock()
	defer d.mu.Unlock()
	for w := range d.queued {
		d.s.dequeueLocked(w.e, w)
		w.gone <- err
	}
	clear(d.queued)
}

// enter checks the driver and store can serve a call and locks the store.
// On success the caller must unlock d.s.mu. While the driver is stalled it
// first waits, ignoring ctx, until the stall ends; the call then goes on
// as a request delivered late would, whatever became of its ctx.
func (d *Driver) enter(ctx context.Context, op string) error {
	d.mu.Lock()
	stalled := d.stalled
	d.mu.Unlock()
	if stalled != nil {
		<-stalled
	} else if err := ctx.Err(); err != nil {
		return fmt.Errorf("memlock: %s: %w", op, err)
	}
	d.mu.Lock()
	killed, closed, partitioned := d.killed, d.closed, d.partitioned
	d.mu.Unlock()
	switch {
	case closed:
		return fmt.Errorf("memlock: %s: %w", op, backend.ErrClosed)
	case killed:
		return fmt.Errorf("memlock: %s: %w: client killed", op, backend.ErrUnavailable)
	case partitioned:
		return fmt.Errorf("memlock: %s: %w: client partitioned from its store", op, backend.ErrUnavailable)
	}
	d.s.mu.Lock()
	if d.s.down {
		d.s.mu.Unlock()
		return fmt.Errorf("memlock: %s: %w: store is down", op, backend.ErrUnavailable)
	}
	return nil
}

// tryMutex is TryAcquire for the mutex.
func (d *Driver) tryMutex(ctx context.Context, req backend.Request) (backend.Grant, error) {
	if err := d.enter(ctx, "acquire"); err != nil {
		return backend.Grant{}, err
	}
	drop := d.claimDrop()
	now := time.Now()
	e := d.s.lookup(req.Key, now, true)
	g, ok := d.s.take(e, req.Owner, req.TTL, now)
	if !ok {
		left := e.expires.Sub(now)
		d.s.mu.Unlock()
		return answerGrant(drop, "acquire", g, backend.NotAcquired(req.Key, left))
	}
	d.grantLocked(&g, req.Key, req.Owner, req.Hooks())
	d.s.mu.Unlock()
	return answerGrant(drop, "acquire", g, nil) // releases: not under d.s.mu
}
