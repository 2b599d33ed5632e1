package zklock

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/distlock/distlock/backend"
)

// lockNode is one EPHEMERAL_SEQUENTIAL node: a place in a lock's queue,
// and the held lock once it is first. It implements backend.Lock.
type lockNode struct {
	d      *Driver
	key    string
	parent string // the key's container node
	name   string // the node's name under parent
	path   string // parent + "/" + name
	guid   string
	owner  string

	session int64 // the session the node lives in
	czxid   int64 // zxid of the create: the fencing token
	onLost  func(error)

	onDoubt    func(error, time.Time)
	onRestored func()

	held     atomic.Bool // granted to the caller
	released atomic.Bool // Release was called (or the node given up)

	lostOnce sync.Once
	lost     chan struct{} // closed when the node or its session is gone
	lostErr  error         // why; set before lost is closed
}

// gone records that the node is gone and, if it was held and not released,
// reports the loss to the portable layer.
func (n *lockNode) gone(err error) {
	n.lostOnce.Do(func() {
		n.d.untrack(n)
		n.lostErr = err
		close(n.lost)
		if n.held.Load() && !n.released.Load() && n.onLost != nil && !errors.Is(err, backend.ErrClosed) {
			n.onLost(err)
		}
	})
}

// lostReason returns why the node is gone, or nil.
func (n *lockNode) lostReason() error {
	select {
	case <-n.lost:
		return n.lostErr
	default:
		return nil
	}
}

// Refresh proves the session alive and the node still ours with one Exists
// round trip. The TTL is the session's, so ttl is not used.
func (n *lockNode) Refresh(ctx context.Context, _ time.Duration) error {
	if n.released.Load() {
		return fmt.Errorf("zklock: refresh %q: %w: released", n.key, backend.ErrNotHeld)
	}
	if err := n.lostReason(); err != nil && !errors.Is(err, backend.ErrClosed) {
		return fmt.Errorf("zklock: refresh %q: %w: %w", n.key, backend.ErrNotHeld, err)
	}
	var exists bool
	var stat *zk.Stat
	var zerr error
	if err := n.d.do(ctx, func() { exists, stat, zerr = n.d.conn.Exists(n.path) }); err != nil {
		return failure("refresh", n.key, err)
	}
	switch {
	case zerr != nil:
		return failure("refresh", n.key, zerr)
	case !exists:
		n.d.untrack(n) // gone: the portable layer does not release it
		return fmt.Errorf("zklock: refresh %q: %w: node %s is gone", n.key, backend.ErrNotHeld, n.name)
	case stat.EphemeralOwner != n.session:
		n.d.untrack(n)
		return fmt.Errorf("zklock: refresh %q: %w: node %s belongs to session %#x, not %#x", n.key, backend.ErrNotHeld, n.name, stat.EphemeralOwner, n.session)
	}
	return nil
}

// Release deletes the node. If the reply is lost, the node is handed to the
// orphan reaper, which deletes it once the connection is back (or the
// session ends), and Release reports ErrUnavailable.
func (n *lockNode) Release(ctx context.Context) error {
	if !n.released.CompareAndSwap(false, true) {
		return fmt.Errorf("zklock: release %q: %w: already released", n.key, backend.ErrNotHeld)
	}
	n.d.untrack(n)
	err := n.remove(ctx)
	switch {
	case err == nil:
		return nil
	case errors.Is(err, zk.ErrNoNode):
		return fmt.Errorf("zklock: release %q: %w: node %s is gone: %w", n.key, backend.ErrNotHeld, n.name, err)
	default:
		return failure("release", n.key, err)
	}
}

// remove deletes the node (and, on servers without container nodes, the
// key's parent if now empty). A delete whose outcome is unknown goes to the
// orphan reaper.
func (n *lockNode) remove(ctx context.Context) error {
	var zerr error
	err := n.d.do(ctx, func() {
		zerr = n.d.conn.Delete(n.path, -1)
		if zerr == nil && n.d.noContainers.Load() {
			_ = n.d.conn.Delete(n.parent, -1) // fails harmlessly if not empty
		}
	})
	if err == nil {
		err = zerr
	}
	if err != nil && !errors.Is(err, zk.ErrNoNode) {
		n.d.orphans.add(orphan{key: n.key, parent: n.parent, guid: n.guid, name: n.name, session: n.session})
	}
	return err
}

// grant returns the Grant for a node that is first in its queue, checked by
// a request sent at sent.
func (n *lockNode) grant(sent time.Time) (backend.Grant, error) {
	n.held.Store(true)
	if err := n.lostReason(); err != nil {
		n.held.Store(false)
		return backend.Grant{}, fmt.Errorf("zklock: acquire %q: %w", n.key, err)
	}
	n.d.track(n)
	return backend.Grant{Lock: n, Token: uint64(n.czxid), TTL: n.d.timeout(), ValidFrom: sent}, nil
}
