package zklock

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/distlock/distlock/backend"
)

// Read-write locks (backend.Read and backend.Write requests, queued by backend.Waiter): Curator's
// InterProcessReadWriteLock recipe. Each side's attempt is a lock node
// (the mutex's kind: protected, EPHEMERAL_SEQUENTIAL, same name shape)
// under the key's read-write parent, base/rw.<encoded key>, which no
// mutex key can name (encodeKey never writes '.'), and List skips. A
// node's side is the first digit of its guid: 0 for a writer, 1 for a
// reader. A writer holds when its node is the lowest; a reader holds when
// no writer's node is below its own. A waiter watches only the node it
// depends on: a writer its predecessor, a reader the nearest writer below
// it. So a queued writer keeps every later reader out (no starvation),
// and the line is served in order.
//
// A writer's token is its node's creation zxid, as for the mutex. Readers
// read the last write's token from base/rwfence.<encoded key>, a
// persistent node each granted writer sets before its grant returns (one
// more round trip for each grant, of either side; the writer's set is a
// multi that checks its own node first, see setLastWrite); it stays after
// the lock is free, as Redis keeps its fencing counter.

const (
	rwParentPrefix = "rw."
	rwFencePrefix  = "rwfence."
	writerDigit    = '0'
	readerDigit    = '1'
)

func (d *Driver) rwParent(key string) string { return d.base + "/" + rwParentPrefix + encodeKey(key) }
func (d *Driver) rwFence(key string) string  { return d.base + "/" + rwFencePrefix + encodeKey(key) }

// rwGUID returns a fresh guid whose first digit names the side.
func rwGUID(mode backend.Kind) string {
	g := []byte(newGUID())
	g[0] = readerDigit
	if mode == backend.Write {
		g[0] = writerDigit
	}
	return string(g)
}

func isWriter(name string) bool {
	g, _, ok := parseName(name)
	return ok && g[0] == writerDigit
}

// rwBlocker returns the index of name in q (-1 if absent) and the node it
// must wait for ("" when it holds): a writer's predecessor, or the
// nearest writer below a reader.
func rwBlocker(q []entry, name string, mode backend.Kind) (int, string) {
	i := position(q, name)
	if i <= 0 {
		return i, ""
	}
	if mode == backend.Write {
		return i, q[i-1].name
	}
	for j := i - 1; j >= 0; j-- {
		if isWriter(q[j].name) {
			return i, q[j].name
		}
	}
	return i, ""
}

// enqueueRW makes a node for one side of req.Key's read-write lock and
// reads the line. A node whose create or read failed goes to the orphan
// reaper (never reused by a later attempt).
func (d *Driver) enqueueRW(ctx context.Context, req backend.Request, mode backend.Kind) (*lockNode, []entry, time.Time, error) {
	if mode != backend.Read && mode != backend.Write {
		return nil, nil, time.Time{}, fmt.Errorf("zklock: acquire %q: %w: rw mode %v", req.Key, backend.ErrInvalidConfig, mode)
	}
	parent := d.rwParent(req.Key)
	n := &lockNode{d: d, key: req.Key, owner: req.Owner, parent: parent, guid: rwGUID(mode), hooks: req.Hooks(), lost: make(chan struct{})}
	var err error
	n.name, n.session, n.czxid, err = d.create(ctx, req, "", n.guid, parent, namePrefix(n.guid))
	if err != nil {
		return nil, nil, time.Time{}, err
	}
	n.path = parent + "/" + n.name
	q, sent, err := d.adopt(ctx, n, true)
	if err != nil {
		d.orphans.add(orphan{key: req.Key, parent: parent, guid: n.guid, name: n.name, session: n.session})
		return nil, nil, time.Time{}, err
	}
	return n, q, sent, nil
}

// tryRW is TryAcquire for a side of a read-write lock: the node stays only if it
// holds at once. waiting is not used: the line itself keeps readers
// behind a queued writer (waitRW).
func (d *Driver) tryRW(ctx context.Context, req backend.Request, mode backend.Kind, _ bool) (backend.Grant, error) {
	n, q, sent, err := d.enqueueRW(ctx, req, mode)
	if err != nil {
		return backend.Grant{}, err
	}
	switch i, pred := rwBlocker(q, n.name, mode); {
	case i < 0:
		n.giveUp(ctx)
		return backend.Grant{}, fmt.Errorf("zklock: acquire %q: %w: our node is not in the line", req.Key, backend.ErrLost)
	case pred == "":
		return d.grantRW(ctx, n, mode, sent)
	}
	n.giveUp(ctx)
	return backend.Grant{}, backend.NotAcquired(req.Key, 0)
}

// waitRW is Wait for a side of a read-write lock: it queues a node and waits, watching
// only the node it depends on, until it holds. When ctx ends or the wait
// fails, the node is deleted before waitRW returns.
func (d *Driver) waitRW(ctx context.Context, req backend.Request, mode backend.Kind) (backend.Grant, error) {
	n, q, sent, err := d.enqueueRW(ctx, req, mode)
	if err != nil {
		return backend.Grant{}, err
	}
	for {
		i, pred := rwBlocker(q, n.name, mode)
		switch {
		case i < 0:
			n.giveUp(ctx)
			return backend.Grant{}, fmt.Errorf("zklock: acquire %q: %w: our node %s left the line (deleted, or the session expired)", req.Key, backend.ErrLost, n.name)
		case pred == "":
			return d.grantRW(ctx, n, mode, sent)
		}
		if err := n.awaitGone(ctx, pred); err != nil {
			n.giveUp(ctx)
			return backend.Grant{}, err
		}
		if q, sent, err = n.readQueue(ctx); err != nil {
			n.giveUp(ctx)
			return backend.Grant{}, err
		}
	}
}

// grantRW grants a node that holds: a writer records its token for the
// readers, a reader reads the last writer's.
func (d *Driver) grantRW(ctx context.Context, n *lockNode, mode backend.Kind, sent time.Time) (backend.Grant, error) {
	var token uint64
	var err error
	if mode == backend.Write {
		token = uint64(n.czxid)
		err = d.setLastWrite(ctx, n.key, n.path, token)
	} else {
		token, err = d.lastWrite(ctx, n.key)
	}
	if err != nil {
		n.giveUp(ctx)
		return backend.Grant{}, failure("acquire", n.key, err)
	}
	g, err := n.grant(sent)
	if err != nil {
		n.giveUp(ctx)
		return backend.Grant{}, err
	}
	g.Token = token
	return g, nil
}

// lastWrite reads the last write's token (0 before the first write).
func (d *Driver) lastWrite(ctx context.Context, key string) (uint64, error) {
	var data []byte
	var zerr error
	if err := d.do(ctx, func() { data, _, zerr = d.conn.Get(d.rwFence(key)) }); err != nil {
		return 0, err
	}
	return parseFence(d.rwFence(key), data, zerr)
}

// parseFence reads the token in the fence node at path from its read
// (data, zerr): 0 when it does not exist yet.
func parseFence(path string, data []byte, zerr error) (uint64, error) {
	switch {
	case errors.Is(zerr, zk.ErrNoNode):
		return 0, nil
	case zerr != nil:
		return 0, zerr
	case len(data) != 8:
		return 0, fmt.Errorf("fence node %s holds %d bytes, want 8", path, len(data))
	}
	return binary.BigEndian.Uint64(data), nil
}

// setLastWrite records a granted writer's token, creating the fence node
// the first time, in a transaction that first checks the writer's node
// (holder) still exists. The check keeps a record that reaches the server
// late from lowering the fence: go-zookeeper keeps a request queued while
// it reconnects, and one made in a session that then expired is sent in
// the next; by then the writer's node is gone with its session, a later
// writer may have recorded a higher token, and an unchecked Set would put
// the older one back (TestRWFenceNotLowered). While the writer's node
// exists no other writer can have been granted.
func (d *Driver) setLastWrite(ctx context.Context, key, holder string, token uint64) error {
	data := binary.BigEndian.AppendUint64(nil, token)
	path := d.rwFence(key)
	check := &zk.CheckVersionRequest{Path: holder, Version: -1}
	var zerr error
	err := d.do(ctx, func() {
		zerr = multiErr(d.conn.Multi(check, &zk.SetDataRequest{Path: path, Data: data, Version: -1}))
		if errors.Is(zerr, errFenceMissing) {
			zerr = multiErr(d.conn.Multi(check, &zk.CreateRequest{Path: path, Data: data, Flags: zk.FlagPersistent, Acl: d.acl}))
			if errors.Is(zerr, errFenceMissing) || errors.Is(zerr, zk.ErrNodeExists) {
				zerr = multiErr(d.conn.Multi(check, &zk.SetDataRequest{Path: path, Data: data, Version: -1}))
			}
		}
	})
	if err != nil {
		return err
	}
	return zerr
}

// errFenceMissing: the fence node does not exist yet (the writer's node
// does).
var errFenceMissing = errors.New("fence node missing")

// multiErr is the outcome of setLastWrite's transaction (check the
// writer's node, then write the fence): nil, errFenceMissing, the writer's
// node gone (ErrLost), or the error of the request or of the write.
func multiErr(res []zk.MultiResponse, err error) error {
	if len(res) == 2 {
		switch {
		case errors.Is(res[0].Error, zk.ErrNoNode):
			return fmt.Errorf("%w: the writer's node is gone (its session expired?)", backend.ErrLost)
		case res[0].Error == nil && errors.Is(res[1].Error, zk.ErrNoNode):
			return errFenceMissing
		case res[0].Error == nil && res[1].Error != nil:
			return res[1].Error
		}
	}
	if err != nil {
		return err
	}
	if len(res) != 2 {
		return fmt.Errorf("zklock: multi returned %d results, want 2", len(res))
	}
	return errors.Join(res[0].Error, res[1].Error)
}
