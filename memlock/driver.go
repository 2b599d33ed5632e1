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

type waiter struct {
	d       *Driver
	e       *entry
	owner   string
	ttl     time.Duration
	hooks   backend.Hooks
	granted chan backend.Grant // buffered: the store never blocks on it
	gone    chan error         // buffered: the driver was killed or closed
}

type subscription struct {
	key   string
	ch    chan struct{}
	watch bool // a Watch (announce.go), not a Subscribe
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

// lostReply is the error of a call whose reply was lost; a lock it
// granted is given back (owner-checked), as a driver's cleanup would.
func lostReply(op string, g backend.Grant) error {
	if l, ok := g.Lock.(*lock); ok {
		_ = l.Release(context.Background())
	}
	return fmt.Errorf("memlock: %s: %w: reply lost", op, backend.ErrUnavailable)
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
		if drop {
			return backend.Grant{}, lostReply("acquire", g)
		}
		return backend.Grant{}, backend.NotAcquired(req.Key, left)
	}
	d.grantLocked(&g, req.Key, req.Owner, req.Hooks())
	d.s.mu.Unlock()
	if drop {
		return backend.Grant{}, lostReply("acquire", g) // releases: not under d.s.mu
	}
	return g, nil
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
			if drop {
				return backend.Grant{}, lostReply("wait", g)
			}
			return g, nil
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
		if drop {
			return backend.Grant{}, lostReply("wait", g)
		}
		return g, nil
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

// subscribeMutex is Subscribe for the mutex.
func (d *Driver) subscribeMutex(ctx context.Context, key string) (<-chan struct{}, func(), error) {
	return d.listen(ctx, "subscribe", key, false)
}

// listen registers a listener on key's mutex entry: a Subscribe
// (releases) or, with watch, a Watch (announce.go: holder and value
// changes). The channel is closed when the driver is killed or closed.
func (d *Driver) listen(ctx context.Context, op, key string, watch bool) (<-chan struct{}, func(), error) {
	if err := d.enter(ctx, op); err != nil {
		return nil, nil, err
	}
	defer d.s.mu.Unlock()
	sub := &subscription{key: key, ch: make(chan struct{}, 1), watch: watch}
	e := d.s.lookup(key, time.Now(), true)
	if watch {
		e.watches[sub] = struct{}{}
	} else {
		e.subs[sub] = struct{}{}
	}
	d.mu.Lock()
	d.subs[sub] = struct{}{}
	d.mu.Unlock()
	cancel := func() {
		d.s.mu.Lock()
		defer d.s.mu.Unlock()
		d.mu.Lock()
		defer d.mu.Unlock()
		if _, ok := d.subs[sub]; ok {
			delete(d.subs, sub)
			d.s.unsubscribeLocked(sub)
		}
	}
	return sub.ch, cancel, nil
}

func (s *Store) unsubscribeLocked(sub *subscription) {
	if e := s.locks[sub.key]; e != nil {
		delete(e.subs, sub)
		delete(e.watches, sub)
		s.gc(e)
	}
}
