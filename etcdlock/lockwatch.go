package etcdlock

import (
	"context"
	"errors"
	"sync"
	"time"

	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// A lockWatch is one watch on the deletions of one etcd key (a holder's
// or waiter's key of some lock), shared by every wait of the driver that
// follows that key and kept open for lockWatchLinger after the last of them
// ends, so that a driver that waits behind the same keys again and again
// creates their watches once.
//
// Why kept open: etcd 3.4 registers a new watch "from now" at the revision
// it read just before taking the store's lock; a watch created while
// another client's write is being applied lands in etcd's unsynced group,
// whose events are delivered only at the next resync, up to 100 ms later.
// Under contention writes never stop, and with watches created for every
// wait, 7% of the hand-offs of 8 contending drivers waited for a recheck of
// the queue (docs/etcd.md, "Where a hand-off's time went"). A watch that
// stays open is synced at most once, when it is new. Key names are reused
// (takeSlot), so a driver contending for a lock keeps the same key name,
// and in a steady queue every waiter follows the same keys cycle after
// cycle.
//
// Why one key and not the lock's range: every deletion is sent to every
// watch that covers it, and each event costs etcd and the client CPU
// (about 30 µs and 40 µs here). A watch of the lock's range in every
// driver sends each release to every contending driver (8 events with 8
// drivers); a watch per followed key sends it to the holder itself and the
// near waiters just behind it (3 with near = 2), whatever the queue's
// length (docs/etcd.md, "The hand-off tail").
//
// The watch reports every deletion of its key in revision order; each
// wait (a lockSub) takes those after the revision of its last read of the
// queue. Deletions dispatched before a wait subscribed are kept in a short
// history and given to it too, so a wait that subscribes after its read
// misses nothing (or learns that it must read again: see subscribe).
type lockWatch struct {
	d      *Driver
	key    string // the etcd key watched
	cancel context.CancelFunc
	// started is closed at the watch's creation notice; done when the
	// watch ended (err says why).
	started chan struct{}
	done    chan struct{}

	mu        sync.Mutex
	err       error
	from      int64     // the watch reports every deletion after this revision (its creation notice's)
	createdAt time.Time // when the creation notice came
	hist      []delEvent
	trimmed   int64 // the newest revision dropped from hist
	subs      map[*lockSub]struct{}
	idle      *idleMark // closes the watch once unused for lockWatchLinger
	// keep: the watch is kept for lockWatchLinger after its last wait,
	// never pruned (see subscribe).
	keep bool
	// unused counts the deletions reported while no wait followed the
	// key, since a wait last did.
	unused int
}

// An idleMark is the pending close of an unused lockWatch. Its timer's
// function gets the mark itself, not the timer: the timer may fire (a
// process stopped past the linger, say) before time.AfterFunc has even
// returned it, so t is only read and written under the lockWatch's mu.
type idleMark struct{ t *time.Timer }

// A delEvent is the deletion of key at revision rev.
type delEvent struct {
	key string
	rev int64
}

// A lockSub is one wait's subscription to a lockWatch.
type lockSub struct {
	w *lockWatch
	// ready has a value when evs has new events or the watch ended; the
	// subscriptions of one wait share it.
	ready chan struct{}

	mu  sync.Mutex
	evs []delEvent
}

// lockWatchLinger is how long a key's watch stays open after its last
// wait ended (a variable for tests).
var lockWatchLinger = 2 * time.Second

const (
	// histMax bounds the deletions a lockWatch remembers; beyond it the
	// oldest half is dropped.
	histMax = 256
	// pruneAfter is how many deletions of another driver's key no wait
	// followed close its watch (see subscribe).
	pruneAfter = 2
)

// subscribeAll subscribes (see subscribe) to the deletions after rev of
// every name, signalling ready; kept says which subscriptions are kept.
// The caller closes subs (closeSubs), also after an error, which wraps
// the failed subscription's as a wait (op, e.g. "wait for") of key.
func (d *Driver) subscribeAll(ctx context.Context, op, key string, names []string, rev int64, ready chan struct{}, kept func(name string) bool) (subs []*lockSub, err error) {
	subs = make([]*lockSub, 0, len(names))
	for _, name := range names {
		sub, err := d.subscribe(name, rev, ready, kept(name))
		if err != nil {
			return subs, d.wrap(ctx, op, key, err)
		}
		subs = append(subs, sub)
	}
	return subs, nil
}

// closeSubs closes every subscription of subs.
func closeSubs(subs []*lockSub) {
	for _, sub := range subs {
		sub.close()
	}
}

// subscribe returns a subscription to the deletions of the etcd key ekey
// after revision after, from the driver's shared watch of that key
// (created if needed), signalled on ready. Once the watch has started,
// sub.covers says after which revision the subscription surely reports
// every deletion: a revision above after means deletions in between may be
// missing, and the caller reads the queue at that revision or later.
//
// keep tells that ekey's watch is kept for lockWatchLinger after its last
// wait whatever happens: the watch of the waiting acquisition's own key,
// of every key a waiter for permits follows (semwait.go: it follows
// nearly every key of the queue, so it will most likely follow a key again
// at its next wait; pruning those watches made 0.4 new watches and 0.4
// reads per acquisition in TestSemaphoreReleaseFanout, keeping them none),
// and of the key a read-write lock's waiter depends on (rwlock.go: its
// drivers wait behind each other's keys again and again).
// The watch of another key a mutex's waiter followed is closed earlier,
// once it has reported pruneAfter deletions that no wait followed (the
// queue's order changed, and no wait of this driver follows that key any
// more), so that it does not cost a watch event per release of that key
// for lockWatchLinger.
func (d *Driver) subscribe(ekey string, after int64, ready chan struct{}, keep bool) (*lockSub, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.closed {
		return nil, errClosedDriver
	}
	if d.watches == nil {
		d.watches = map[string]*lockWatch{}
	}
	lw := d.watches[ekey]
	if lw == nil {
		lw = d.startLockWatch(ekey)
		d.watches[ekey] = lw
	}
	sub := &lockSub{w: lw, ready: ready}
	lw.mu.Lock()
	defer lw.mu.Unlock()
	if lw.idle != nil {
		lw.idle.t.Stop()
		lw.idle = nil
	}
	lw.subs[sub] = struct{}{}
	lw.keep = lw.keep || keep
	lw.unused = 0
	for _, e := range lw.hist {
		if e.rev > after {
			sub.evs = append(sub.evs, e)
		}
	}
	if len(sub.evs) > 0 {
		sub.signal()
	}
	return sub, nil
}

var errClosedDriver = errors.New("etcdlock: driver closed")

// covers returns the revision after which sub surely sees every deletion,
// once the watch has started.
func (sub *lockSub) covers() int64 {
	lw := sub.w
	lw.mu.Lock()
	defer lw.mu.Unlock()
	return max(lw.from, lw.trimmed)
}

// age is how long ago the watch started (0 before).
func (sub *lockSub) age() time.Duration {
	lw := sub.w
	lw.mu.Lock()
	defer lw.mu.Unlock()
	if lw.createdAt.IsZero() {
		return 0
	}
	return time.Since(lw.createdAt)
}

// signal wakes the wait of sub.
func (sub *lockSub) signal() {
	select {
	case sub.ready <- struct{}{}:
	default:
	}
}

// ended reports whether sub's watch ended.
func (sub *lockSub) ended() bool {
	select {
	case <-sub.w.done:
		return true
	default:
		return false
	}
}

// take returns the deletions reported since the last call.
func (sub *lockSub) take() []delEvent {
	sub.mu.Lock()
	defer sub.mu.Unlock()
	evs := sub.evs
	sub.evs = nil
	return evs
}

// close ends the subscription; the watch closes lockWatchLinger after its
// last subscription ended, unless another begins meanwhile.
func (sub *lockSub) close() {
	lw := sub.w
	lw.mu.Lock()
	defer lw.mu.Unlock()
	delete(lw.subs, sub)
	if len(lw.subs) > 0 || lw.idle != nil {
		return
	}
	m := &idleMark{}
	m.t = time.AfterFunc(lockWatchLinger, func() { lw.closeIfIdle(m) })
	lw.idle = m
}

// closeIfIdle ends the watch if it is still unused since idle mark t was set.
func (lw *lockWatch) closeIfIdle(t *idleMark) {
	d := lw.d
	d.mu.Lock()
	defer d.mu.Unlock()
	lw.mu.Lock()
	defer lw.mu.Unlock()
	if lw.idle != t || len(lw.subs) > 0 {
		return
	}
	if d.watches[lw.key] == lw {
		delete(d.watches, lw.key)
	}
	lw.cancel()
}

// startLockWatch starts the watch of ekey. d.mu is held.
func (d *Driver) startLockWatch(ekey string) *lockWatch {
	ctx, cancel := context.WithCancel(d.ctx)
	lw := &lockWatch{
		d: d, key: ekey, cancel: cancel,
		started: make(chan struct{}), done: make(chan struct{}),
		subs: map[*lockSub]struct{}{},
	}
	d.wg.Go(func() {
		defer cancel()
		err := lw.run(ctx)
		d.mu.Lock()
		if d.watches[ekey] == lw {
			delete(d.watches, ekey)
		}
		d.mu.Unlock()
		lw.mu.Lock()
		lw.err = err
		if lw.idle != nil {
			lw.idle.t.Stop()
		}
		close(lw.done)
		for sub := range lw.subs {
			sub.signal()
		}
		lw.mu.Unlock()
	})
	return lw
}

// run dispatches the watch's deletions to the subscriptions until the
// watch ends, and returns why it ended.
func (lw *lockWatch) run(ctx context.Context) error {
	// WithRequireLeader: a member that loses its leader cancels the watch,
	// and the waits read the queue and subscribe again.
	wch := lw.d.c.Watch(clientv3.WithRequireLeader(ctx), lw.key,
		clientv3.WithFilterPut(), clientv3.WithCreatedNotify())
	for wr := range wch {
		switch {
		case wr.Err() != nil:
			return wr.Err()
		case wr.Canceled:
			return errors.New("watch canceled")
		case wr.Created:
			lw.mu.Lock()
			lw.from, lw.createdAt = wr.Header.Revision, time.Now()
			lw.mu.Unlock()
			close(lw.started)
			continue
		}
		if t := lw.dispatch(wr.Events); t != nil {
			lw.closeIfIdle(t)
		}
	}
	if ctx.Err() != nil {
		return ctx.Err()
	}
	return errors.New("watch closed")
}

// dispatch gives evs' deletions to every subscription and the history. It
// returns the idle timer of a watch of another driver's key that reported
// a deletion while no wait followed it, for the caller to close the watch
// (see subscribe); else nil.
func (lw *lockWatch) dispatch(evs []*clientv3.Event) *idleMark {
	lw.mu.Lock()
	defer lw.mu.Unlock()
	n := len(lw.hist)
	for _, ev := range evs {
		if ev.Type == mvccpb.DELETE {
			lw.hist = append(lw.hist, delEvent{key: string(ev.Kv.Key), rev: ev.Kv.ModRevision})
		}
	}
	added := lw.hist[n:]
	if len(added) == 0 {
		return nil
	}
	if len(lw.subs) == 0 && !lw.keep {
		if lw.unused++; lw.unused >= pruneAfter {
			return lw.idle
		}
	}
	for sub := range lw.subs {
		sub.mu.Lock()
		sub.evs = append(sub.evs, added...)
		sub.mu.Unlock()
		sub.signal()
	}
	if len(lw.hist) > histMax {
		drop := len(lw.hist) - histMax/2
		lw.trimmed = lw.hist[drop-1].rev
		lw.hist = append(lw.hist[:0:0], lw.hist[drop:]...)
	}
	return nil
}
