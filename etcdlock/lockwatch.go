package etcdlock

import (
	"context"
	"errors"
	"sync"
	"time"

	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// A lockWatch is one watch on the deletions in one lock's key range, shared
// by every wait of the driver for that lock and kept open for
// lockWatchLinger after the last of them ends, so that a driver that waits
// for the same lock again and again creates the watch once.
//
// Why: etcd 3.4 registers a new watch "from now" at the revision it read
// just before taking the store's lock; a watch created while another
// client's write is being applied lands in etcd's unsynced group, whose
// events are delivered only at the next resync, up to 100 ms later. Under
// contention writes never stop, and with watches created for every wait
// (as before) 7% of the hand-offs of 8 contending drivers waited for a
// recheck of the queue (docs/etcd.md, "Where a hand-off's time went"). A
// watch that stays open is synced at most once, when it is new.
//
// The watch reports every deletion in the range in revision order; each
// wait (a lockSub) takes those after the revision of its last read of the
// queue. Deletions dispatched before a wait subscribed are kept in a short
// history and given to it too, so a wait that subscribes after its read
// misses nothing (or learns that it must read again: see subscribe).
type lockWatch struct {
	d      *Driver
	rng    string
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
	idle      *time.Timer // closes the watch once unused for lockWatchLinger
}

// A delEvent is the deletion of key at revision rev.
type delEvent struct {
	key string
	rev int64
}

// A lockSub is one wait's subscription to a lockWatch.
type lockSub struct {
	w *lockWatch
	// ready has a value when evs has new events.
	ready chan struct{}

	mu  sync.Mutex
	evs []delEvent
}

const (
	// lockWatchLinger is how long a lock's watch stays open after its last
	// wait ended.
	lockWatchLinger = 2 * time.Second
	// histMax bounds the deletions a lockWatch remembers; beyond it the
	// oldest half is dropped.
	histMax = 256
)

// subscribe returns a subscription to the deletions in rng after revision
// after, from the lock's shared watch (created if needed). Once the watch
// has started, sub.covers says after which revision the subscription
// surely reports every deletion: a revision above after means deletions
// in between may be missing, and the caller reads the queue at that
// revision or later.
func (d *Driver) subscribe(rng string, after int64) (*lockSub, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.closed {
		return nil, errClosedDriver
	}
	if d.watches == nil {
		d.watches = map[string]*lockWatch{}
	}
	lw := d.watches[rng]
	if lw == nil {
		lw = d.startLockWatch(rng)
		d.watches[rng] = lw
	}
	sub := &lockSub{w: lw, ready: make(chan struct{}, 1)}
	lw.mu.Lock()
	defer lw.mu.Unlock()
	if lw.idle != nil {
		lw.idle.Stop()
		lw.idle = nil
	}
	lw.subs[sub] = struct{}{}
	for _, e := range lw.hist {
		if e.rev > after {
			sub.evs = append(sub.evs, e)
		}
	}
	if len(sub.evs) > 0 {
		sub.ready <- struct{}{}
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
	var t *time.Timer
	t = time.AfterFunc(lockWatchLinger, func() { lw.closeIfIdle(t) })
	lw.idle = t
}

// closeIfIdle ends the watch if it is still unused since idle timer t was set.
func (lw *lockWatch) closeIfIdle(t *time.Timer) {
	d := lw.d
	d.mu.Lock()
	defer d.mu.Unlock()
	lw.mu.Lock()
	defer lw.mu.Unlock()
	if lw.idle != t || len(lw.subs) > 0 {
		return
	}
	if d.watches[lw.rng] == lw {
		delete(d.watches, lw.rng)
	}
	lw.cancel()
}

// startLockWatch starts the watch of rng. d.mu is held.
func (d *Driver) startLockWatch(rng string) *lockWatch {
	ctx, cancel := context.WithCancel(d.ctx)
	lw := &lockWatch{
		d: d, rng: rng, cancel: cancel,
		started: make(chan struct{}), done: make(chan struct{}),
		subs: map[*lockSub]struct{}{},
	}
	d.wg.Add(1)
	go func() {
		defer d.wg.Done()
		defer cancel()
		err := lw.run(ctx)
		d.mu.Lock()
		if d.watches[rng] == lw {
			delete(d.watches, rng)
		}
		d.mu.Unlock()
		lw.mu.Lock()
		lw.err = err
		if lw.idle != nil {
			lw.idle.Stop()
		}
		lw.mu.Unlock()
		close(lw.done)
	}()
	return lw
}

// run dispatches the watch's deletions to the subscriptions until the
// watch ends, and returns why it ended.
func (lw *lockWatch) run(ctx context.Context) error {
	// WithRequireLeader: a member that loses its leader cancels the watch,
	// and the waits read the queue and subscribe again.
	wch := lw.d.c.Watch(clientv3.WithRequireLeader(ctx), lw.rng,
		clientv3.WithPrefix(), clientv3.WithFilterPut(), clientv3.WithCreatedNotify())
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
		lw.dispatch(wr.Events)
	}
	if ctx.Err() != nil {
		return ctx.Err()
	}
	return errors.New("watch closed")
}

// dispatch gives evs' deletions to every subscription and the history.
func (lw *lockWatch) dispatch(evs []*clientv3.Event) {
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
		return
	}
	for sub := range lw.subs {
		sub.mu.Lock()
		sub.evs = append(sub.evs, added...)
		sub.mu.Unlock()
		select {
		case sub.ready <- struct{}{}:
		default:
		}
	}
	if len(lw.hist) > histMax {
		drop := len(lw.hist) - histMax/2
		lw.trimmed = lw.hist[drop-1].rev
		lw.hist = append(lw.hist[:0:0], lw.hist[drop:]...)
	}
}
