package zklock

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/distlock/distlock/backend"
)

// Semaphores, natively (the idea of Curator's InterProcessSemaphoreV2,
// without its lock): every acquisition, holder or waiter, is one protected
// EPHEMERAL_SEQUENTIAL node in the semaphore's container, bound to the
// driver's session as a lock's node is. Its name carries what it asks for
// and under which limit, "_c_<guid>-sem-<permits>-<limit>-<sequence>", so
// that one read of the children tells every client the whole queue, with
// no read of any node's data.
//
// The nodes in sequence order form a queue, and the nodes that hold are a
// prefix of it: walking the queue from the head, a node holds while every
// node before it holds and their permits plus its own fit ITS limit; the
// first node that does not fit, and every node after it, waits. So:
//
//   - a grant never puts more permits in use than the asker's own limit:
//     every holder is ahead of it, and their permits plus its own fit;
//   - holding is monotonic: nodes only leave the queue or join its end, so
//     a node that holds keeps holding (nobody is evicted, whatever the
//     limits of later askers);
//   - waiters are served in arrival order (fair): a waiter for many
//     permits is not overtaken by later waiters for fewer, nor by later
//     askers with a larger limit;
//   - the token is the node's czxid (the zxid of its create, returned by
//     the create's multi as for a lock): holders are granted in queue
//     order, which is czxid order, so tokens increase with grants.
//
// A waiter sets a watch on every node ahead of it (pipelined, when it
// queues: nodes ahead only ever leave, so these are all it will need) and
// follows the queue ahead of it from their deletion events, with no
// request, until that queue says it holds; then one read of the children
// confirms the grant (and dates it). A release therefore costs the
// waiters behind it no request, except the ones it admits.
//
// The container is base/sem.<encoded key>: an encoded key has no bare
// '.', so no lock's container ("<encoded key>") nor a read-write lock's
// ("rw.<encoded key>", "rwfence.<encoded key>") is ever a semaphore's, and
// List (which keeps only children that are encoded keys) never shows it.

const (
	semParentPrefix = "sem."
	semMarker       = "-sem-"
)

// semParent returns the container node of key's semaphore.
func (d *Driver) semParent(key string) string { return d.base + "/" + semParentPrefix + encodeKey(key) }

// semNamePrefix is the path segment the driver asks ZooKeeper to append a
// sequence number to, for an acquisition of permits under limit.
func semNamePrefix(guid string, permits, limit int) string {
	return protectedPrefix + guid + semMarker + strconv.Itoa(permits) + "-" + strconv.Itoa(limit) + "-"
}

// semEntry is one node of a semaphore's queue.
type semEntry struct {
	name           string
	seq            int64
	permits, limit int
}

// parseSemName reads a semaphore node's name: ok only for names
// semNamePrefix makes (canonical decimal numbers, 1 <= permits <= limit <=
// MaxSemaphoreLimit) followed by a 10-digit sequence number. Children of
// any other shape were made by someone else and are ignored.
func parseSemName(name string) (semEntry, bool) {
	g := guidOf(name)
	if g == "" {
		return semEntry{}, false
	}
	rest, ok := strings.CutPrefix(name[len(protectedPrefix)+guidLen:], semMarker)
	if !ok {
		return semEntry{}, false
	}
	ps, rest, ok1 := strings.Cut(rest, "-")
	ls, seqs, ok2 := strings.Cut(rest, "-")
	if !ok1 || !ok2 || len(seqs) != seqLen {
		return semEntry{}, false
	}
	p, perr := strconv.Atoi(ps)
	l, lerr := strconv.Atoi(ls)
	if perr != nil || lerr != nil || strconv.Itoa(p) != ps || strconv.Itoa(l) != ls ||
		p < 1 || l < p || l > backend.MaxSemaphoreLimit {
		return semEntry{}, false
	}
	var seq int64
	for _, c := range []byte(seqs) {
		if c < '0' || c > '9' {
			return semEntry{}, false
		}
		seq = seq*10 + int64(c-'0')
	}
	return semEntry{name: name, seq: seq, permits: p, limit: l}, true
}

// semQueueOf returns the semaphore nodes among children, in queue order.
func semQueueOf(children []string) []semEntry {
	q := make([]semEntry, 0, len(children))
	for _, c := range children {
		if e, ok := parseSemName(c); ok {
			q = append(q, e)
		}
	}
	slices.SortFunc(q, func(a, b semEntry) int { return cmp.Compare(a.seq, b.seq) })
	return q
}

// holding returns how many of q's first nodes hold their permits: each
// holds while the nodes before it hold and their permits plus its own
// are within its limit.
func holding(q []semEntry) int {
	used := 0
	for i, e := range q {
		if used+e.permits > e.limit {
			return i
		}
		used += e.permits
	}
	return len(q)
}

// semPosition returns name's index in q, or -1.
func semPosition(q []semEntry, name string) int {
	return slices.IndexFunc(q, func(e semEntry) bool { return e.name == name })
}

// enqueuePermits creates the node of an acquisition and reads the queue
// after it. A node whose read failed goes to the reaper (a semaphore's
// node is never reused by a retry: a retry queues again).
func (d *Driver) enqueuePermits(ctx context.Context, req backend.Request) (*lockNode, []semEntry, time.Time, error) {
	parent := d.semParent(req.Key)
	n := &lockNode{d: d, key: req.Key, owner: req.Owner, parent: parent, guid: newGUID(), hooks: req.Hooks(), lost: make(chan struct{})}
	var err error
	n.name, n.session, n.czxid, err = d.create(ctx, req, "", n.guid, parent, semNamePrefix(n.guid, req.Permits, req.Limit), nil)
	if err != nil {
		return nil, nil, time.Time{}, err
	}
	n.path = parent + "/" + n.name
	q, sent, err := n.readSemQueue(ctx)
	if err != nil {
		d.orphans.add(orphan{key: req.Key, parent: parent, guid: n.guid, name: n.name, session: n.session})
		return nil, nil, time.Time{}, err
	}
	return n, q, sent, nil
}

// readSemQueue reads the semaphore's queue, by a request sent at sent.
func (n *lockNode) readSemQueue(ctx context.Context) ([]semEntry, time.Time, error) {
	children, sent, err := n.siblings(ctx, "acquire permits of")
	return semQueueOf(children), sent, err
}

// tryPermits is TryAcquire for a semaphore's permits: it queues and, unless
// its node holds at once, deletes the node again. It never jumps the
// queue: waiters ahead count.
func (d *Driver) tryPermits(ctx context.Context, req backend.Request) (backend.Grant, error) {
	n, q, sent, err := d.enqueuePermits(ctx, req)
	if err != nil {
		return backend.Grant{}, err
	}
	switch i := semPosition(q, n.name); {
	case i < 0:
		n.giveUp(ctx)
		return backend.Grant{}, fmt.Errorf("zklock: acquire permits of %q: %w: our node is not in the queue", req.Key, backend.ErrLost)
	case i < holding(q):
		g, err := n.grant(sent)
		if err != nil {
			n.giveUp(ctx)
		}
		return g, err
	}
	n.giveUp(ctx)
	return backend.Grant{}, backend.NotAcquired(req.Key, 0)
}

// waitPermits is Wait for a semaphore's permits: it queues, watches the
// nodes ahead, and returns once its node holds. When ctx ends, or on any
// error, the node is deleted before waitPermits returns.
func (d *Driver) waitPermits(ctx context.Context, req backend.Request) (backend.Grant, error) {
	n, q, sent, err := d.enqueuePermits(ctx, req)
	if err != nil {
		return backend.Grant{}, err
	}
	w := &semWatch{n: n, watched: map[string]bool{}, done: make(chan struct{})}
	defer close(w.done)
	for {
		i := semPosition(q, n.name)
		switch {
		case i < 0:
			n.giveUp(ctx)
			return backend.Grant{}, fmt.Errorf("zklock: acquire permits of %q: %w: our node %s left the queue (deleted, or the session expired)", req.Key, backend.ErrLost, n.name)
		case i < holding(q):
			g, err := n.grant(sent)
			if err != nil {
				n.giveUp(ctx)
			}
			return g, err
		}
		if err := w.await(ctx, q[:i+1]); err != nil {
			n.giveUp(ctx)
			return backend.Grant{}, err
		}
		if q, sent, err = n.readSemQueue(ctx); err != nil {
			n.giveUp(ctx)
			return backend.Grant{}, err
		}
	}
}

// semWatch is a waiter's watches on the nodes ahead of it. Each watch is
// read by a driver goroutine that forwards its event to events until the
// wait ends (done), and drops it after, so the driver's count of watches
// stays exact.
type semWatch struct {
	n       *lockNode
	watched map[string]bool // nodes with a watch set and not fired
	events  chan semEvent
	done    chan struct{}
}

type semEvent struct {
	name string
	ev   zk.Event
}

// await returns once the queue ahead of our node, as q (ending with our
// node) followed by the deletions seen since, says that it holds, or when
// a watched node changed in another way (the caller reads the queue
// again). It watches the nodes of q ahead not watched yet first.
func (w *semWatch) await(ctx context.Context, q []semEntry) error {
	ahead := slices.Clone(q[:len(q)-1])
	gone, err := w.watch(ctx, ahead)
	if err != nil {
		return err
	}
	drop := func(name string) {
		if i := semPosition(ahead, name); i >= 0 {
			ahead = slices.Delete(ahead, i, i+1)
		}
	}
	for _, name := range gone {
		drop(name)
	}
	me := q[len(q)-1]
	for holding(append(ahead, me)) <= len(ahead) {
		select {
		case e := <-w.events:
			delete(w.watched, e.name)
			switch e.ev.Type {
			case zk.EventNodeDeleted:
				drop(e.name)
			case zk.EventNotWatching:
				if errors.Is(e.ev.Err, zk.ErrSessionExpired) {
					return fmt.Errorf("zklock: acquire permits of %q: %w: session expired while waiting: %w", w.n.key, backend.ErrLost, e.ev.Err)
				}
				return fmt.Errorf("zklock: acquire permits of %q: %w: %w", w.n.key, backend.ErrClosed, e.ev.Err)
			default:
				return nil // changed, not deleted: read the queue again (and watch it again)
			}
		case <-ctx.Done():
			return fmt.Errorf("zklock: acquire permits of %q: %w", w.n.key, context.Cause(ctx))
		case <-w.n.d.closing:
			return fmt.Errorf("zklock: acquire permits of %q: %w", w.n.key, backend.ErrClosed)
		}
	}
	return nil
}

// watch sets a watch (GetW, all pipelined in one round trip) on each node
// of ahead not watched yet, and returns the ones found gone.
func (w *semWatch) watch(ctx context.Context, ahead []semEntry) (gone []string, err error) {
	d := w.n.d
	var todo []string
	for _, e := range ahead {
		if !w.watched[e.name] {
			todo = append(todo, e.name)
		}
	}
	if len(todo) == 0 {
		return nil, nil
	}
	if w.events == nil {
		w.events = make(chan semEvent, 1)
	}
	type result struct {
		ch  <-chan zk.Event
		err error
	}
	res := make([]result, len(todo))
	var h handoff
	derr := d.do(ctx, func() {
		var wg sync.WaitGroup
		for j, name := range todo {
			d.watchSet()
			wg.Go(func() { _, _, res[j].ch, res[j].err = d.conn.GetW(w.n.parent + "/" + name) })
		}
		wg.Wait()
		if !h.done() {
			for _, r := range res {
				d.settleWatch(r.ch, r.err)
			}
		}
	})
	if derr != nil && h.abandon() {
		return nil, failure("acquire permits of", w.n.key, derr)
	}
	var firstErr error
	for j, r := range res {
		switch {
		case r.err == nil && derr == nil:
			w.watched[todo[j]] = true
			w.forward(todo[j], r.ch)
		case r.err == nil:
			d.settleWatch(r.ch, nil)
		case errors.Is(r.err, zk.ErrNoNode):
			d.watchGone() // GetW sets no watch on a missing node
			gone = append(gone, todo[j])
		default:
			d.watchGone()
			firstErr = cmp.Or(firstErr, r.err)
		}
	}
	if derr != nil {
		return nil, failure("acquire permits of", w.n.key, derr)
	}
	if firstErr != nil {
		return nil, failure("acquire permits of", w.n.key, firstErr)
	}
	return gone, nil
}

// forward hands the watch ch's event to the waiter while it waits.
func (w *semWatch) forward(name string, ch <-chan zk.Event) {
	d := w.n.d
	d.goTracked(func() {
		select {
		case ev := <-ch:
			d.watchGone()
			select {
			case w.events <- semEvent{name, ev}:
			case <-w.done:
			}
		case <-d.closing:
		}
	})
}
