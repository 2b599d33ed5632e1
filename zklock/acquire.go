package zklock

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/distlock/distlock/backend"
)

// giveUpTimeout bounds the delete of a node whose acquisition failed or was
// abandoned, when the caller's ctx has already ended.
const giveUpTimeout = 5 * time.Second

// tryMutex creates a node in key's queue and keeps it only if it is
// first; otherwise it deletes the node at once and reports ErrNotAcquired.
func (d *Driver) tryMutex(ctx context.Context, req backend.Request) (backend.Grant, error) {
	n, q, sent, err := d.enqueue(ctx, req, false)
	if err != nil {
		return backend.Grant{}, err
	}
	if position(q, n.name) == 0 {
		g, err := n.grant(sent)
		if err != nil {
			n.giveUp(ctx)
		}
		return g, err
	}
	n.giveUp(ctx)
	if position(q, n.name) < 0 {
		return backend.Grant{}, fmt.Errorf("zklock: acquire %q: %w: our node is not in the queue", req.Key, backend.ErrLost)
	}
	return backend.Grant{}, backend.NotAcquired(req.Key, 0)
}

// waitMutex queues a node for req and waits until it is first, watching only
// its immediate predecessor. When ctx ends, the node is deleted before Wait
// returns. If the session expires while waiting, Wait returns ErrLost.
func (d *Driver) waitMutex(ctx context.Context, req backend.Request) (backend.Grant, error) {
	n, q, sent, err := d.enqueue(ctx, req, true)
	if err != nil {
		return backend.Grant{}, err
	}
	for {
		i := position(q, n.name)
		switch {
		case i == 0:
			g, err := n.grant(sent)
			if err != nil {
				n.giveUp(ctx)
			}
			return g, err
		case i < 0:
			n.giveUp(ctx)
			return backend.Grant{}, fmt.Errorf("zklock: acquire %q: %w: our node %s left the queue (deleted, or the session expired)", req.Key, backend.ErrLost, n.name)
		}
		if err := n.awaitGone(ctx, q[i-1].name); err != nil {
			n.leave(ctx, err)
			return backend.Grant{}, err
		}
		if q, sent, err = n.readQueue(ctx); err != nil {
			n.leave(ctx, err)
			return backend.Grant{}, err
		}
	}
}

// awaitGone returns once the node pred (our predecessor) is gone, or with
// an error when ctx ends, our node or session is lost, or the driver closes.
func (n *lockNode) awaitGone(ctx context.Context, pred string) error {
	var watch <-chan zk.Event
	var zerr error
	var h handoff
	err := n.d.do(ctx, func() {
		n.d.watchSet()
		_, _, watch, zerr = n.d.conn.GetW(n.parent + "/" + pred)
		if !h.done() {
			n.d.settleWatch(watch, zerr)
		}
	})
	if err != nil && h.abandon() {
		return failure("acquire", n.key, err)
	}
	if err != nil || zerr != nil {
		n.d.settleWatch(watch, zerr) // GetW sets no watch on a missing node
	}
	switch {
	case err != nil:
		return failure("acquire", n.key, err)
	case errors.Is(zerr, zk.ErrNoNode):
		return nil
	case zerr != nil:
		return failure("acquire", n.key, zerr)
	}
	select {
	case ev := <-watch:
		n.d.watchGone()
		if ev.Type == zk.EventNotWatching {
			if errors.Is(ev.Err, zk.ErrSessionExpired) {
				return fmt.Errorf("zklock: acquire %q: %w: session expired while waiting: %w", n.key, backend.ErrLost, ev.Err)
			}
			return fmt.Errorf("zklock: acquire %q: %w: %w", n.key, backend.ErrClosed, ev.Err)
		}
		return nil // deleted or changed: read the queue again
	case <-n.lost:
		n.d.drainWatch(watch)
		if errors.Is(n.lostErr, backend.ErrLost) {
			return n.lostErr
		}
		return fmt.Errorf("zklock: acquire %q: %w: %w", n.key, backend.ErrLost, n.lostErr)
	case <-ctx.Done():
		n.d.drainWatch(watch)
		return fmt.Errorf("zklock: acquire %q: %w", n.key, context.Cause(ctx))
	case <-n.d.closing:
		return fmt.Errorf("zklock: acquire %q: %w", n.key, backend.ErrClosed)
	}
}

// readQueue reads the key's queue again.
func (n *lockNode) readQueue(ctx context.Context) ([]entry, time.Time, error) {
	children, sent, err := n.siblings(ctx, "acquire")
	return queueOf(children), sent, err
}

// siblings reads the children of n's parent (n's queue), by a request
// sent at sent; op names the operation in its errors (a parent gone is
// one: n is gone with it).
func (n *lockNode) siblings(ctx context.Context, op string) ([]string, time.Time, error) {
	var children []string
	var zerr error
	sent := time.Now()
	if err := n.d.do(ctx, func() { children, _, zerr = n.d.conn.Children(n.parent) }); err != nil {
		return nil, sent, failure(op, n.key, err)
	}
	if zerr != nil {
		return nil, sent, failure(op, n.key, zerr)
	}
	return children, sent, nil
}

// leave ends a wait that failed with err. If the server was only
// unreachable, the node keeps its place in line for the portable layer's
// retry of the same owner, which reuses it (the reaper deletes it if no
// retry comes); otherwise the node is deleted.
func (n *lockNode) leave(ctx context.Context, err error) {
	if !errors.Is(err, backend.ErrUnavailable) || ctx.Err() != nil || n.lostReason() != nil {
		n.giveUp(ctx)
		return
	}
	n.released.Store(true)
	n.d.orphans.add(orphan{key: n.key, owner: n.owner, parent: n.parent, guid: n.guid, name: n.name, session: n.session})
}

// giveUp deletes a node that will not be held, bounded by ctx or, if ctx
// has ended, by giveUpTimeout; if that fails the reaper deletes it later.
func (n *lockNode) giveUp(ctx context.Context) {
	n.released.Store(true)
	n.held.Store(false)
	n.untrack()
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), giveUpTimeout)
	defer cancel()
	_ = n.remove(ctx)
}
