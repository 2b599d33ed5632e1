package zklock

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/go-zookeeper/zk"

	"github.com/distlock/distlock/backend"
	"github.com/distlock/distlock/internal/ownerval"
)

var _ backend.Announcer = (*Driver)(nil)

// SetValue implements backend.Announcer: a SetData of the lock's own node
// (its data becomes "owner\nvalue", internal/ownerval). The node is
// ephemeral in this driver's session and its name carries a random id
// never reused, so the write succeeds only while the node exists, that
// is, while it holds the lock (it is first in line once granted, until
// it is deleted): otherwise ZooKeeper answers NoNode and SetValue
// ErrNotHeld. The czxid, the token, is unchanged by a SetData.
func (d *Driver) SetValue(ctx context.Context, l backend.Lock, value string) error {
	n, ok := l.(*lockNode)
	if !ok || n.d != d {
		return fmt.Errorf("zklock: set value: %w: the lock (%T) was not granted by this driver", backend.ErrUnsupported, l)
	}
	if n.parent != d.base+"/"+encodeKey(n.key) { // a read-write lock's side or permits
		return fmt.Errorf("zklock: set value %q: %w: values are kept for the mutex only", n.key, backend.ErrUnsupported)
	}
	if n.released.Load() || !n.held.Load() {
		return fmt.Errorf("zklock: set value %q: %w: the lock was released", n.key, backend.ErrNotHeld)
	}
	if err := n.lostReason(); err != nil {
		return fmt.Errorf("zklock: set value %q: %w: %w", n.key, backend.ErrNotHeld, err)
	}
	var stat *zk.Stat
	var zerr error
	if err := d.do(ctx, func() { stat, zerr = d.conn.Set(n.path, ownerval.Join(n.owner, value), -1) }); err != nil {
		return failure("set value", n.key, err)
	}
	switch {
	case errors.Is(zerr, zk.ErrNoNode):
		return fmt.Errorf("zklock: set value %q: %w: node %s is gone", n.key, backend.ErrNotHeld, n.path)
	case zerr != nil:
		return failure("set value", n.key, zerr)
	case stat.EphemeralOwner != n.session:
		// Cannot happen: the name is this driver's own. Reported, not hidden.
		return fmt.Errorf("zklock: set value %q: %w: node %s belongs to session %#x, not %#x", n.key, backend.ErrNotHeld, n.path, stat.EphemeralOwner, n.session)
	}
	return nil
}

// Watch implements backend.Announcer with ZooKeeper's one-shot watches,
// set again each time one fires and before the change is announced (so a
// read after the announcement sees every change the new watches missed):
// a child watch on the lock's node (a place in line taken or given up:
// a grant, a release, a session ending), a data watch on the node first
// in line (its value set, or its deletion), or, while the lock's node
// does not exist, an exists watch on it. go-zookeeper sets the watches
// again after a reconnection within the session, with the changes made
// meanwhile; when the session ends or the driver closes they end
// (EventNotWatching) and so does the channel, as it does when a watch
// cannot be set.
func (d *Driver) Watch(ctx context.Context, key string) (<-chan struct{}, func(), error) {
	if err := ctx.Err(); err != nil {
		return nil, nil, fmt.Errorf("zklock: watch %q: %w", key, context.Cause(ctx))
	}
	w := &nodeWatch{d: d, parent: d.base + "/" + encodeKey(key), key: key, stop: make(chan struct{})}
	if err := w.arm(); err != nil {
		w.settle()
		return nil, nil, err
	}
	out := make(chan struct{}, 1)
	if !d.goTracked(func() { w.run(out) }) {
		w.settle()
		return nil, nil, fmt.Errorf("zklock: watch %q: %w", key, backend.ErrClosed)
	}
	return out, sync.OnceFunc(func() { close(w.stop) }), nil
}

// nodeWatch is one Watch: the watches it has set and not seen fire.
type nodeWatch struct {
	d           *Driver
	parent, key string
	stop        chan struct{}

	kids, data, exists <-chan zk.Event
}

// run waits for a watch to fire, sets it again, and announces the change,
// until the watch ends.
func (w *nodeWatch) run(out chan struct{}) {
	defer close(out)
	defer w.settle()
	for {
		var ev zk.Event
		select {
		case ev = <-w.kids:
			w.kids = nil
		case ev = <-w.data:
			w.data = nil
		case ev = <-w.exists:
			w.exists = nil
		case <-w.stop:
			return
		case <-w.d.closing:
			return
		}
		w.d.watchGone()
		if ev.Type == zk.EventNotWatching || w.arm() != nil {
			return
		}
		select {
		case out <- struct{}{}:
		default:
		}
	}
}

// arm sets the watches missing: the child watch (or, with no lock node,
// the exists watch) and the data watch of the node first in line. Its
// calls run on the caller's goroutine (a ctx that never ends), so that
// every watch they set is known: go-zookeeper bounds each by its receive
// timeout, and one fails at once while the connection has no session.
func (w *nodeWatch) arm() error {
	d, ctx := w.d, context.Background()
	for w.kids == nil {
		var children []string
		var ch <-chan zk.Event
		var zerr error
		d.watchSet()
		if err := d.do(ctx, func() { children, _, ch, zerr = d.conn.ChildrenW(w.parent) }); err != nil {
			d.watchGone() // do ran nothing
			return failure("watch", w.key, err)
		}
		if zerr == nil {
			w.kids = ch
			return w.armHead(children)
		}
		d.watchGone() // none set
		if !errors.Is(zerr, zk.ErrNoNode) {
			return failure("watch", w.key, zerr)
		}
		if w.exists != nil {
			return nil // already waiting for the lock's node to appear
		}
		var found bool
		d.watchSet()
		if err := d.do(ctx, func() { found, _, ch, zerr = d.conn.ExistsW(w.parent) }); err != nil {
			d.watchGone()
			return failure("watch", w.key, err)
		}
		if zerr != nil {
			d.watchGone()
			return failure("watch", w.key, zerr)
		}
		w.exists = ch
		if !found {
			return nil
		}
		// Made meanwhile: watch its children after all.
	}
	return nil
}

// armHead sets the data watch on the node first in line, unless one is
// set: that node's deletion fires it (and the child watch), so it stays
// on the first node until then.
func (w *nodeWatch) armHead(children []string) error {
	q := queueOf(children)
	if w.data != nil || len(q) == 0 {
		return nil
	}
	d := w.d
	var ch <-chan zk.Event
	var zerr error
	d.watchSet()
	if err := d.do(context.Background(), func() { _, _, ch, zerr = d.conn.GetW(w.parent + "/" + q[0].name) }); err != nil {
		d.watchGone()
		return failure("watch", w.key, err)
	}
	if zerr != nil {
		d.watchGone() // GetW sets no watch on a missing node
		if errors.Is(zerr, zk.ErrNoNode) {
			return nil // gone already: the child watch fires for it
		}
		return failure("watch", w.key, zerr)
	}
	w.data = ch
	return nil
}

// settle hands the watches still set to the driver to drain, keeping its
// count of watches exact.
func (w *nodeWatch) settle() {
	for _, ch := range []<-chan zk.Event{w.kids, w.data, w.exists} {
		if ch != nil {
			w.d.drainWatch(ch)
		}
	}
	w.kids, w.data, w.exists = nil, nil, nil
}
