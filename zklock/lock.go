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
	hooks   backend.Hooks

	held     atomic.Bool                 // granted to the caller
	released atomic.Bool                 // Release was called (or the node given up)
	set      *backend.HeldSet[*lockNode] // the set grant tracked it in

	// The data watch a renewal round set on the node (refreshall.go): it
	// fires when the node is deleted. Guarded by wmu.
	wmu   sync.Mutex
	watch <-chan zk.Event
	wgen  uint64            // the connection generation it was set in (session.gen)
	stale []<-chan zk.Event // watches replaced before they fired (a re-arm after a reconnect)

	lostOnce sync.Once
	lost     chan struct{} // closed when the node or its session is gone
	lostErr  error         // why; set before lost is closed
}

// gone records that the node is gone (its session expired, or a Refresh
// found it deleted or another session's): its Refresh and Release no
// longer ask the server.
func (n *lockNode) gone(err error) {
	n.lostOnce.Do(func() {
		n.lostErr = err
		close(n.lost)
	})
}

// untrack takes a node released or given up out of its held set.
func (n *lockNode) untrack() {
	if n.set != nil {
		n.set.Untrack(n)
	}
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

// Refresh proves the session alive and the node still ours: a Sync, then
// an Exists. The TTL is the session's, so ttl is not used.
//
// The Sync makes the answer the leader's: a follower serves reads (and
// pings) from its own state, and one cut off from the leader keeps doing so
// for up to syncLimit ticks, while the leader, hearing nothing of the
// session through it, may expire the session and hand the lock on. A bare
// Exists on that follower would extend the lease from a stale read
// (TestStaleFollowerRefresh). The follower forwards the Sync to the leader
// and answers it, and then the Exists sent after it on the same session,
// only once it has applied everything the leader had committed when it
// received the Sync.
func (n *lockNode) Refresh(ctx context.Context, _ time.Duration) error {
	if err := n.refreshable(); err != nil {
		return err
	}
	var ex existsResult
	if err := n.d.do(ctx, func() {
		if _, ex.err = n.d.conn.Sync(n.path); ex.err == nil {
			ex.exists, ex.stat, ex.err = n.d.conn.Exists(n.path)
		}
	}); err != nil {
		return failure("refresh", n.key, err)
	}
	return n.refreshed(ex)
}

// refreshable returns why a Refresh need not ask the server, if it need
// not: the node was released, or is known gone.
func (n *lockNode) refreshable() error {
	if n.released.Load() {
		return fmt.Errorf("zklock: refresh %q: %w: released", n.key, backend.ErrNotHeld)
	}
	if err := n.lostReason(); err != nil {
		return fmt.Errorf("zklock: refresh %q: %w: %w", n.key, backend.ErrNotHeld, err)
	}
	return nil
}

// existsResult is the answer to an Exists of a lock node.
type existsResult struct {
	exists  bool
	stat    *zk.Stat
	err     error
	watched bool // not read: the node's watch vouches for it (refreshall.go)
}

// refreshed judges the answer to the Exists that followed a Sync: the
// lease lives on if the node is there and still this session's.
func (n *lockNode) refreshed(ex existsResult) error {
	exists, stat, zerr := ex.exists, ex.stat, ex.err
	switch {
	case zerr != nil:
		return failure("refresh", n.key, zerr)
	case ex.watched:
		return nil
	case !exists:
		n.gone(fmt.Errorf("node %s is gone", n.name))
		return fmt.Errorf("zklock: refresh %q: %w: node %s is gone", n.key, backend.ErrNotHeld, n.name)
	case stat.EphemeralOwner != n.session:
		// Its parent was deleted and made again, and the name reused: that
		// node is not ours to delete.
		n.gone(fmt.Errorf("node %s belongs to session %#x, not %#x", n.name, stat.EphemeralOwner, n.session))
		return fmt.Errorf("zklock: refresh %q: %w: node %s belongs to session %#x, not %#x", n.key, backend.ErrNotHeld, n.name, stat.EphemeralOwner, n.session)
	}
	return nil
}

// Release deletes the node. If the reply is lost, the node is handed to the
// orphan reaper, which deletes it once the connection is back (or the
// session ends), and Release reports ErrUnavailable. A node known gone
// (its session expired, or a Refresh found it gone) is not deleted:
// Release reports ErrNotHeld.
func (n *lockNode) Release(ctx context.Context) error {
	if !n.released.CompareAndSwap(false, true) {
		return fmt.Errorf("zklock: release %q: %w: already released", n.key, backend.ErrNotHeld)
	}
	n.untrack()
	defer n.dropWatch() // after the delete, whose reply follows the watch's event
	if err := n.lostReason(); err != nil {
		return fmt.Errorf("zklock: release %q: %w: %w", n.key, backend.ErrNotHeld, err)
	}
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
//
// The node lives in n.session: if the connection has another session now,
// that one expired and took the node with it, though the reads that
// decided the grant may have answered (go-zookeeper sends a request kept
// queued across the expiry in the next session: TestRWReadGrantAfterExpiry).
func (n *lockNode) grant(sent time.Time) (backend.Grant, error) {
	n.held.Store(true)
	if cur := n.d.conn.SessionID(); cur != n.session {
		n.held.Store(false)
		return backend.Grant{}, fmt.Errorf("zklock: acquire %q: %w: node %s belonged to session %#x, which expired (now %#x)", n.key, backend.ErrLost, n.name, n.session, cur)
	}
	if err := n.lostReason(); err != nil {
		n.held.Store(false)
		return backend.Grant{}, fmt.Errorf("zklock: acquire %q: %w", n.key, err)
	}
	n.set = n.d.heldSet()
	if err := n.set.Track(n, n.hooks); err != nil {
		n.held.Store(false)
		return backend.Grant{}, fmt.Errorf("zklock: acquire %q: %w", n.key, err)
	}
	return backend.Grant{Lock: n, Token: uint64(n.czxid), TTL: n.d.vouched(), ValidFrom: sent}, nil
}
