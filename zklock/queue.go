package zklock

import (
	"cmp"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/distlock/distlock/backend"
)

// Lock node names: "_c_<32 hex>-lock-<sequence>". The "_c_<guid>-" prefix
// is the protected-node convention of Curator and go-zookeeper. The driver
// writes the prefix (its guid is 32 lower-case hex digits, from newGUID);
// ZooKeeper appends the sequence number as exactly 10 decimal digits of a
// non-negative counter. Nothing else is a lock node: a child of another
// shape (a negative or short sequence, an upper-case or non-hex guid) was
// made by some other client, and the queue ignores it, so that it cannot
// take the head of the line (see docs/zookeeper.md, ACLs).
const (
	protectedPrefix = "_c_"
	nameMarker      = "-lock-"
	guidLen         = 32
	seqLen          = 10
	nameLen         = len(protectedPrefix) + guidLen + len(nameMarker) + seqLen
)

// entry is one node of a lock's queue.
type entry struct {
	name string
	seq  int64
}

// namePrefix is the path segment the driver asks ZooKeeper to append a
// sequence number to.
func namePrefix(guid string) string { return protectedPrefix + guid + nameMarker }

// nodeName is the name ZooKeeper gives a node created with namePrefix(guid)
// when its parent's counter is seq ("%010d").
func nodeName(guid string, seq int64) string {
	return namePrefix(guid) + fmt.Sprintf("%0*d", seqLen, seq)
}

// parseName returns the guid and sequence number of a lock node name: ok
// only for names nodeName makes from a guid newGUID makes and a
// non-negative sequence number of at most 10 digits.
func parseName(name string) (guid string, seq int64, ok bool) {
	if len(name) != nameLen || !strings.HasPrefix(name, protectedPrefix) {
		return "", 0, false
	}
	guid = name[len(protectedPrefix) : len(protectedPrefix)+guidLen]
	rest := name[len(protectedPrefix)+guidLen:]
	if !strings.HasPrefix(rest, nameMarker) {
		return "", 0, false
	}
	if !isGUID(guid) {
		return "", 0, false
	}
	for _, c := range []byte(rest[len(nameMarker):]) {
		if c < '0' || c > '9' {
			return "", 0, false
		}
		seq = seq*10 + int64(c-'0')
	}
	return guid, seq, true
}

// isGUID reports whether s is a guid newGUID makes: 32 lower-case hex
// digits.
func isGUID(s string) bool {
	if len(s) != guidLen {
		return false
	}
	for i := 0; i < len(s); i++ {
		if c := s[i]; (c < '0' || c > '9') && (c < 'a' || c > 'f') {
			return false
		}
	}
	return true
}

// guidOf returns the guid of a node name of the driver's (a lock's or a
// semaphore's: both start with the protected prefix and the guid), or "".
func guidOf(name string) string {
	if len(name) < len(protectedPrefix)+guidLen || !strings.HasPrefix(name, protectedPrefix) {
		return ""
	}
	if g := name[len(protectedPrefix) : len(protectedPrefix)+guidLen]; isGUID(g) {
		return g
	}
	return ""
}

// queueOf returns the lock nodes among children, in queue order.
func queueOf(children []string) []entry {
	q := make([]entry, 0, len(children))
	for _, c := range children {
		if _, seq, ok := parseName(c); ok {
			q = append(q, entry{c, seq})
		}
	}
	slices.SortFunc(q, func(a, b entry) int { return cmp.Compare(a.seq, b.seq) })
	return q
}

// position returns name's index in q, or -1.
func position(q []entry, name string) int {
	return slices.IndexFunc(q, func(e entry) bool { return e.name == name })
}

func newGUID() string {
	var b [guidLen / 2]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// enqueue puts a node for req in key's queue: it reuses the node of an
// earlier attempt by the same owner whose reply was lost, or creates one.
// It returns the node, watched for loss, and the queue as seen after it
// was created, read by a request sent at sent. With keep (a wait, which
// the portable layer retries at once when the server was unreachable), a
// node whose create or read failed keeps its place in line for that
// retry; without (a TryAcquire, which no one retries), it is handed to the
// reaper to be deleted as soon as the server answers, so it cannot hold
// the lock as a ghost.
func (d *Driver) enqueue(ctx context.Context, req backend.Request, keep bool) (n *lockNode, q []entry, sent time.Time, err error) {
	reuser := ""
	if keep {
		reuser = req.Owner
	}
	parent := d.base + "/" + encodeKey(req.Key)
	n = &lockNode{d: d, key: req.Key, owner: req.Owner, parent: parent, hooks: req.Hooks(), lost: make(chan struct{})}
	reused := false
	if o, ok := d.orphans.take(req.Key, req.Owner, d.conn.SessionID()); ok {
		n.guid, n.name, reused = o.guid, o.name, true
	} else {
		n.guid = newGUID()
	}
	if reused && n.name == "" {
		n.name, err = d.findGUID(ctx, req, parent, n.guid)
		if err != nil {
			return nil, nil, time.Time{}, err
		}
	}
	if n.name != "" {
		n.path = parent + "/" + n.name
		q, sent, err = d.adopt(ctx, n)
		if err != nil {
			d.orphans.add(orphan{key: req.Key, owner: reuser, parent: parent, guid: n.guid, name: n.name, session: n.session})
			return nil, nil, time.Time{}, err
		}
		return n, q, sent, nil
	}
	var ls listing
	n.name, n.session, n.czxid, err = d.create(ctx, req, reuser, n.guid, parent, namePrefix(n.guid), &ls)
	if err != nil {
		return nil, nil, time.Time{}, err
	}
	n.path = parent + "/" + n.name
	if ls.err != nil {
		d.orphans.add(orphan{key: req.Key, owner: reuser, parent: parent, guid: n.guid, name: n.name, session: n.session})
		return nil, nil, time.Time{}, failure("acquire", req.Key, ls.err)
	}
	return n, queueOf(ls.children), ls.sent, nil
}

// listing is the read of a lock's queue that create makes right after
// the node's create, in the same call (one goroutine hand-off for both,
// see do): the children of the parent, read by a request sent after the
// create's answer, so they include the new node; sent is when the create
// was sent, from which the grant's validity counts (earlier than the
// read's own send time: never a longer validity than a separate read's).
type listing struct {
	children []string
	err      error
	sent     time.Time
}

// create makes the protected EPHEMERAL_SEQUENTIAL node seg<sequence> (seg
// starts with the protected prefix and guid), creating the key's container
// (and the base path) when missing, and returns its name. If the
// outcome is unknown (connection lost after sending, or ctx ended first),
// the node is handed to the orphan reaper (or to the next attempt by the
// same owner, reuser, if not "") before create returns. With ls not nil,
// a successful create is followed in the same call by the read of
// parent's children into ls (its error there too: the node exists
// whatever the read says).
func (d *Driver) create(ctx context.Context, req backend.Request, reuser, guid, parent, seg string, ls *listing) (name string, session, czxid int64, err error) {
	prefix := parent + "/" + seg
	pending := orphan{key: req.Key, owner: reuser, parent: parent, guid: guid, session: d.conn.SessionID()}
	for attempt := 0; ; attempt++ {
		var path string
		var czxid int64
		var cerr error
		session := d.conn.SessionID()
		// Who handles the outcome: the caller (delivered), or f itself once
		// the caller gave up (abandoned), in which case f hands a node that
		// may exist to the reaper.
		const (
			running int32 = iota
			delivered
			abandoned
		)
		var state atomic.Int32
		if ls != nil {
			ls.sent = time.Now()
		}
		err := d.do(ctx, func() {
			path, czxid, cerr = d.createNode(prefix, parent, []byte(req.Owner), session)
			if cerr == nil && ls != nil {
				ls.children, _, ls.err = d.conn.Children(parent)
			}
			if !state.CompareAndSwap(running, delivered) && (cerr == nil || ambiguous(cerr)) {
				o := pending
				if cerr == nil {
					o.name = path[len(parent)+1:]
				}
				d.orphans.add(o)
			}
		})
		if err != nil && state.CompareAndSwap(running, abandoned) {
			return "", 0, 0, failure("acquire", req.Key, err)
		}
		if err != nil && cerr == nil {
			// ctx ended just as the create succeeded: the node is ours to remove.
			pending.name = path[len(parent)+1:]
			d.orphans.add(pending)
			return "", 0, 0, failure("acquire", req.Key, err)
		}
		switch {
		case cerr == nil:
			return path[len(parent)+1:], session, czxid, nil
		case errors.Is(cerr, zk.ErrNoNode) && attempt < 3:
			if err := d.ensureParent(ctx, parent); err != nil {
				return "", 0, 0, failure("acquire", req.Key, err)
			}
		case ambiguous(cerr):
			d.orphans.add(pending)
			return "", 0, 0, failure("acquire", req.Key, cerr)
		default:
			return "", 0, 0, failure("acquire", req.Key, cerr)
		}
	}
}

// createNode creates the lock node under parent and, in the same
// transaction (a multi), touches parent's data: every operation of a multi
// carries the transaction's zxid, so parent's mzxid in the reply is the new
// node's czxid, the fencing token, with no read after the create. session
// is the session the request was sent in; the node lives in it unless the
// session changed meanwhile, which is reported as a lost connection (the
// node, if made, is then an orphan).
func (d *Driver) createNode(prefix, parent string, data []byte, session int64) (path string, czxid int64, err error) {
	res, err := d.conn.Multi(
		&zk.CreateRequest{Path: prefix, Data: data, Acl: d.acl, Flags: zk.FlagEphemeralSequential},
		&zk.SetDataRequest{Path: parent, Version: -1},
	)
	if err == nil && len(res) != 2 {
		err = fmt.Errorf("zklock: multi returned %d results, want 2", len(res))
	}
	if err == nil {
		err = errors.Join(res[0].Error, res[1].Error)
	}
	if err == nil && res[1].Stat == nil {
		err = errors.New("zklock: multi returned no stat for the parent")
	}
	if err != nil {
		// The create comes first: its error says why (a missing parent,
		// ACLs); the set's can only follow from it.
		if len(res) > 0 && res[0].Error != nil {
			return "", 0, res[0].Error
		}
		return "", 0, err
	}
	if d.conn.SessionID() != session {
		return res[0].String, 0, zk.ErrConnectionClosed
	}
	return res[0].String, res[1].Stat.Mzxid, nil
}

// findGUID looks for the node a lost create with guid may have made; "" if
// there is none. On failure the orphan goes back to the reaper.
func (d *Driver) findGUID(ctx context.Context, req backend.Request, parent, guid string) (string, error) {
	var children []string
	var cerr error
	if err := d.do(ctx, func() { children, _, cerr = d.conn.Children(parent) }); err != nil {
		cerr = err
	}
	if cerr != nil && !errors.Is(cerr, zk.ErrNoNode) {
		d.orphans.add(orphan{key: req.Key, owner: req.Owner, parent: parent, guid: guid, session: d.conn.SessionID()})
		return "", failure("acquire", req.Key, cerr)
	}
	for _, c := range children {
		if g, _, ok := parseName(c); ok && g == guid {
			return c, nil
		}
	}
	return "", nil
}

// ensureParent creates the container node of a key, and the base path if
// it is missing. Servers without container nodes get a persistent node,
// removed after the last release instead.
func (d *Driver) ensureParent(ctx context.Context, parent string) error {
	var err error
	if derr := d.do(ctx, func() { err = d.createParent(parent) }); derr != nil {
		return derr
	}
	if !errors.Is(err, zk.ErrNoNode) {
		return err
	}
	if err := d.ensureBase(ctx); err != nil {
		return err
	}
	if derr := d.do(ctx, func() { err = d.createParent(parent) }); derr != nil {
		return derr
	}
	return err
}

func (d *Driver) createParent(parent string) error {
	var err error
	if !d.noContainers.Load() {
		_, err = d.conn.CreateContainer(parent, nil, zk.FlagContainer, d.acl)
		// A server older than 3.5 answers "unimplemented" (-6), which
		// go-zookeeper reports as "unknown error: -6".
		if err != nil && (strings.HasSuffix(err.Error(), ": -6") || errors.Is(err, zk.ErrBadArguments)) {
			d.noContainers.Store(true)
		}
	}
	if d.noContainers.Load() {
		_, err = d.conn.Create(parent, nil, zk.FlagPersistent, d.acl)
	}
	if errors.Is(err, zk.ErrNodeExists) {
		return nil
	}
	return err
}

// ensureBase creates the base path and its ancestors (persistent).
func (d *Driver) ensureBase(ctx context.Context) error {
	segs := strings.Split(d.base[1:], "/")
	for i := range segs {
		p := "/" + strings.Join(segs[:i+1], "/")
		var err error
		if derr := d.do(ctx, func() { _, err = d.conn.Create(p, nil, zk.FlagPersistent, d.acl) }); derr != nil {
			return derr
		}
		if err != nil && !errors.Is(err, zk.ErrNodeExists) {
			return fmt.Errorf("creating %s: %w", p, err)
		}
	}
	return nil
}

// adopt reads, in one round trip (pipelined), the queue and the stat of
// a node reused from an earlier attempt: its czxid is the fencing token,
// its ephemeral owner the session it lives in. (A node just made reads
// its queue in create's call: listing.)
func (d *Driver) adopt(ctx context.Context, n *lockNode) ([]entry, time.Time, error) {
	var (
		children []string
		cerr     error
		exists   bool
		stat     *zk.Stat
		eerr     error
	)
	sent := time.Now()
	err := d.do(ctx, func() {
		var wg sync.WaitGroup
		wg.Go(func() { exists, stat, eerr = d.conn.Exists(n.path) })
		children, _, cerr = d.conn.Children(n.parent)
		wg.Wait()
	})
	if err != nil {
		return nil, sent, failure("acquire", n.key, err)
	}
	if err := errors.Join(cerr, eerr); err != nil {
		return nil, sent, failure("acquire", n.key, err)
	}
	if !exists {
		return nil, sent, fmt.Errorf("zklock: acquire %q: %w: our node vanished (session expired?)", n.key, backend.ErrLost)
	}
	n.session, n.czxid = stat.EphemeralOwner, stat.Czxid
	return queueOf(children), sent, nil
}
