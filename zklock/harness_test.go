package zklock

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"path"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/distlock/distlock/backend"
	"github.com/distlock/distlock/sandbox"
)

// testSession is the session timeout of the drivers under test: short, so
// the suite runs fast (the sandbox's tickTime is 250 ms, so the server
// grants anything from 500 ms).
const testSession = 2 * time.Second

// busySession is the session timeout of the conformance cases that keep
// several requests of their own in flight on each driver's session
// (busyCases). A renewal (Sync, then Exists) is answered in the session's
// order, after the writes queued before it (creates and deletes, each
// written to the server's log), so on a busy machine it waits for them:
// with testSession its lease's validity (5/12 of 2 s, 833 ms) leaves it
// 555 ms from its send at a third of it, which the issue's
// MultiLockNoDeadlock ran out of twice ("validity ran out while in
// doubt: zklock: refresh ...: context deadline exceeded"). 4 s doubles
// that (1.1 s); the case waits for no expiry, so it costs it no time.
// The other cases keep testSession: raising it for all (4 s) takes
// TestConformance from 48 s to 84 s.
const busySession = 4 * time.Second

// busyCases are the conformance cases run with busySession.
var busyCases = []string{"MultiLockNoDeadlock"}

// conformanceHarness is the harness of conformance case t (its name's
// last element is the case's).
func conformanceHarness(c *cluster, t *testing.T) *harness {
	h := newHarness(c)
	if slices.Contains(busyCases, path.Base(t.Name())) {
		h.session = busySession
	}
	return h
}

// netPath is one driver's network path to the ensemble: a sandbox.Proxy
// per server, which the driver's dialer picks by the server address
// go-zookeeper dials. Faults of one driver leave the others connected.
type netPath struct {
	proxies map[string]*sandbox.Proxy // by server address as given to go-zookeeper

	mu   sync.Mutex
	dead bool // killed for good: connections cut, no new ones, ever
	base int  // Dropped() when the last dropAfter was armed
}

// newPath makes proxies to hosts; a host that is a node of g follows the
// node's current address (a container's port changes after a restart).
func newPath(g *sandbox.Group, hosts []string) (*netPath, error) {
	np := &netPath{proxies: map[string]*sandbox.Proxy{}}
	for _, h := range hosts {
		target := func() string { return h }
		for _, n := range g.Nodes() {
			if n.Addr() == h {
				target = n.Addr
			}
		}
		p, err := sandbox.StartProxy(target)
		if err != nil {
			np.close()
			return nil, err
		}
		np.proxies[h] = p
	}
	return np, nil
}

var errUnknownHost = errors.New("zklock test: host without a proxy")

// dial is the driver's zk.Dialer: addr's proxy instead of addr.
func (np *netPath) dial(network, addr string, timeout time.Duration) (net.Conn, error) {
	p, ok := np.proxies[addr]
	if !ok {
		return nil, fmt.Errorf("%w: %s", errUnknownHost, addr)
	}
	return net.DialTimeout(network, p.Addr(), timeout)
}

func (np *netPath) each(f func(*sandbox.Proxy)) {
	for _, p := range np.proxies {
		f(p)
	}
}

// block cuts every connection of the driver and refuses new ones (a
// partition the client notices at once: its connection drops), or heals
// that.
func (np *netPath) block(on bool) {
	np.mu.Lock()
	dead := np.dead
	np.mu.Unlock()
	np.each(func(p *sandbox.Proxy) {
		switch {
		case on:
			p.Refuse(true)
			p.Reset()
		case !dead:
			p.Heal()
		}
	})
}

// cut resets every live connection; later ones succeed again (a network
// blip), unless kill: then none ever does, as if the process had died (no
// closeSession reaches the server, so the session and its ephemeral nodes
// live on until the server expires it).
func (np *netPath) cut(kill bool) {
	if kill {
		np.mu.Lock()
		np.dead = true
		np.mu.Unlock()
	}
	np.each(func(p *sandbox.Proxy) {
		if kill {
			p.Refuse(true)
		}
		p.Reset()
	})
}

// partition black-holes every connection of the driver, current and new,
// nothing closed (conformance.Partitioner); heal ends it.
func (np *netPath) partition(on bool) {
	np.each(func(p *sandbox.Proxy) {
		if on {
			p.Blackhole(sandbox.Both)
		} else {
			p.Heal()
		}
	})
}

// opcodeLockCreate is the opcode of the request that creates a lock node:
// a multi (create + setData on the parent, for the token).
const opcodeLockCreate = 14

// opcodePing is the opcode of the client's pings.
const opcodePing = 11

// dropAfter loses the reply to the driver's next request with opcode op
// (any request but a ping when op is 0): the request reaches the server,
// the proxy waits for the server's reply to it (by xid), drops it and
// closes the connection.
func (np *netPath) dropAfter(op int32) {
	np.mu.Lock()
	np.base = np.droppedCount()
	np.mu.Unlock()
	var taken atomic.Bool
	claim := func(chunk []byte) bool {
		_, ok := zkRequest(chunk, op)
		return ok && taken.CompareAndSwap(false, true)
	}
	np.each(func(p *sandbox.Proxy) { p.DropReply(claim, zkAnswers(op)) })
}

func (np *netPath) droppedCount() int {
	n := 0
	np.each(func(p *sandbox.Proxy) { n += p.Dropped() })
	return n
}

// dropped reports whether a reply was lost since the last dropAfter.
func (np *netPath) dropped() bool {
	np.mu.Lock()
	defer np.mu.Unlock()
	return np.droppedCount() > np.base
}

func (np *netPath) close() { np.each(func(p *sandbox.Proxy) { _ = p.Close() }) }

// zkFrames calls f with the payload of each length-prefixed ZooKeeper
// frame in chunk until it returns true.
func zkFrames(chunk []byte, f func(payload []byte) bool) bool {
	for len(chunk) >= 4 {
		n := int(binary.BigEndian.Uint32(chunk))
		if n < 0 || 4+n > len(chunk) {
			return false
		}
		if f(chunk[4 : 4+n]) {
			return true
		}
		chunk = chunk[4+n:]
	}
	return false
}

// zkRequest returns the xid of a request in chunk with opcode op (any but
// a ping when op is 0). Client requests have xids from 1; a connect
// request (no xid) and the special xids (pings, setWatches, auth) are
// negative or zero there.
func zkRequest(chunk []byte, op int32) (int32, bool) {
	var xid int32
	ok := zkFrames(chunk, func(b []byte) bool {
		if len(b) < 8 {
			return false
		}
		x, o := int32(binary.BigEndian.Uint32(b)), int32(binary.BigEndian.Uint32(b[4:]))
		if x <= 0 || o == opcodePing || (op != 0 && o != op) {
			return false
		}
		xid = x
		return true
	})
	return xid, ok
}

// zkAnswers returns a reply matcher: the chunk holds the reply to the
// request's xid.
func zkAnswers(op int32) func(request, reply []byte) bool {
	return func(request, reply []byte) bool {
		xid, ok := zkRequest(request, op)
		if !ok {
			return true
		}
		return zkFrames(reply, func(b []byte) bool {
			return len(b) >= 4 && int32(binary.BigEndian.Uint32(b)) == xid
		})
	}
}

// cluster is a sandbox ZooKeeper group with an admin session for
// server-side faults.
type cluster struct {
	g     *sandbox.Group
	admin *zk.Conn

	mu     sync.Mutex
	paths  map[backend.Driver]*netPath
	all    []*netPath   // closed when the test ends
	paused map[int]bool // nodes paused by the harness
}

func startCluster(t testing.TB, nodes int) *cluster {
	t.Helper()
	if testing.Short() {
		t.Skip("needs ZooKeeper servers (sandbox); skipped with -short")
	}
	g := sandbox.StartT(t, sandbox.Spec{Kind: sandbox.ZooKeeper, Nodes: nodes})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	admin, _, err := connect(ctx, g.Addrs(), dialConfig{timeout: 10 * time.Second, connectTimeout: 50 * time.Second})
	if err != nil {
		t.Fatalf("admin session: %v", err)
	}
	t.Cleanup(admin.Close)
	c := &cluster{g: g, admin: admin, paths: map[backend.Driver]*netPath{}, paused: map[int]bool{}}
	t.Cleanup(c.closePaths) // after the drivers' cleanups, registered later
	return c
}

// newPath makes a driver's path to hosts, closed when the test ends.
func (c *cluster) newPath(hosts []string) (*netPath, error) {
	np, err := newPath(c.g, hosts)
	if err != nil {
		return nil, err
	}
	c.mu.Lock()
	c.all = append(c.all, np)
	c.mu.Unlock()
	return np, nil
}

func (c *cluster) closePaths() {
	c.mu.Lock()
	all := c.all
	c.all = nil
	c.mu.Unlock()
	for _, np := range all {
		np.close()
	}
}

// newDriver makes a driver with its own session through proxies of its own.
func (c *cluster) newDriver(ctx context.Context, session time.Duration) (*Driver, *netPath, error) {
	return c.newDriverAt(ctx, session, c.g.Addrs())
}

// driverT is newDriver for a test: a driver it cannot make fails t, and
// the driver is closed when t ends.
func (c *cluster) driverT(t *testing.T, ctx context.Context, session time.Duration) (*Driver, *netPath) {
	t.Helper()
	d, np, err := c.newDriver(ctx, session)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = d.Close() })
	return d, np
}

// countedDriver starts a one-member cluster and returns it, a context
// bounded by a minute, and a driver on it with a 10 s session (pings
// every ~3 s: few in the tests' request counts) and its path.
func countedDriver(t *testing.T) (*cluster, context.Context, *Driver, *netPath) {
	t.Helper()
	c := startCluster(t, 1)
	ctx := ctxFor(t, time.Minute)
	d, np := c.driverT(t, ctx, 10*time.Second)
	return c, ctx, d, np
}

// newDriverAt is newDriver connecting only to hosts.
func (c *cluster) newDriverAt(ctx context.Context, session time.Duration, hosts []string) (*Driver, *netPath, error) {
	np, err := c.newPath(hosts)
	if err != nil {
		return nil, nil, err
	}
	cfg := urlConfig{
		hosts: hosts,
		dial:  dialConfig{timeout: session, connectTimeout: 30 * time.Second, dialer: np.dial},
		opts:  Options{Base: defaultBase},
	}
	d, err := dialDriver(ctx, cfg)
	if err != nil {
		return nil, nil, err
	}
	c.mu.Lock()
	c.paths[d] = np
	c.mu.Unlock()
	return d, np, nil
}

// newUserDriver connects to the servers as a service does, through proxies
// of its own (their addresses are the servers go-zookeeper is given), waits
// for the session and returns New(conn, opts). The caller closes conn
// (returned whenever it was made).
func (c *cluster) newUserDriver(ctx context.Context, session time.Duration, opts *Options) (*Driver, *zk.Conn, error) {
	np, err := c.newPath(c.g.Addrs())
	if err != nil {
		return nil, nil, err
	}
	var servers []string
	for _, h := range c.g.Addrs() {
		servers = append(servers, np.proxies[h].Addr())
	}
	conn, events, err := zk.Connect(servers, session)
	if err != nil {
		return nil, nil, err
	}
	if err := awaitSession(ctx, events, nil); err != nil {
		return nil, conn, err
	}
	d, err := New(conn, opts)
	if err != nil {
		return nil, conn, err
	}
	c.mu.Lock()
	c.paths[d] = np
	c.mu.Unlock()
	return d, conn, nil
}

// onPath runs f on d's path (pathOf), or returns pathOf's error.
func (c *cluster) onPath(d backend.Driver, f func(*netPath)) error {
	np, err := c.pathOf(d)
	if err != nil {
		return err
	}
	f(np)
	return nil
}

func (c *cluster) pathOf(d backend.Driver) (*netPath, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	np, ok := c.paths[d]
	if !ok {
		return nil, fmt.Errorf("driver %p was not made by this cluster", d)
	}
	return np, nil
}

// queue returns key's lock nodes in order, read by the admin session after
// a sync, so that a follower serving it has caught up with the leader.
func (c *cluster) queue(key string) ([]entry, error) {
	parent := defaultBase + "/" + encodeKey(key)
	if _, err := c.admin.Sync(parent); err != nil && !errors.Is(err, zk.ErrNoNode) {
		return nil, err
	}
	children, _, err := c.admin.Children(parent)
	if errors.Is(err, zk.ErrNoNode) {
		return nil, nil
	}
	return queueOf(children), err
}

// deleteHolder deletes the first node of key's queue from the admin session.
func (c *cluster) deleteHolder(key string) error {
	q, err := c.queue(key)
	if err != nil {
		return err
	}
	if len(q) == 0 {
		return fmt.Errorf("no lock node for %q", key)
	}
	return c.admin.Delete(defaultBase+"/"+encodeKey(key)+"/"+q[0].name, -1)
}

// harness adapts a cluster to conformance.Harness, ServerControl,
// Partitioner, ReplyDropper and UserClients. Each driver reaches the
// servers through proxies of its own.
type harness struct {
	c       *cluster
	session time.Duration // the drivers' session timeout

	mu    sync.Mutex
	users []*zk.Conn // the user-made connections, closed by Close
}

func newHarness(c *cluster) *harness { return &harness{c: c, session: testSession} }

func (h *harness) NewDriver(ctx context.Context) (backend.Driver, error) {
	d, _, err := h.c.newDriver(ctx, h.session)
	return d, err
}

// NewUserDriver makes a driver as a service does (conformance.UserClients):
// zk.Connect with the session timeout and no option (go-zookeeper's own
// dialer, logger and event channel), the session awaited on the event
// channel as New's doc says, and New over it. The connection goes to
// proxies of the driver's own, so Partition and Kill work on it; Close
// closes it.
func (h *harness) NewUserDriver(ctx context.Context) (backend.Driver, error) {
	d, conn, err := h.c.newUserDriver(ctx, h.session, &Options{SessionTimeout: h.session})
	if conn != nil {
		h.mu.Lock()
		h.users = append(h.users, conn)
		h.mu.Unlock()
	}
	return d, err
}

// TTL is the leases' validity: 5/12 of the session timeout (vouchNum).
// A killed driver's locks end when the server expires its session, a
// whole session timeout later.
func (h *harness) TTL() time.Duration { return h.session * vouchNum / vouchDen }

func (h *harness) Kill(_ context.Context, d backend.Driver) error {
	return h.c.onPath(d, func(np *netPath) { np.cut(true) })
}

// Partition black-holes d's connections, current and new: go-zookeeper
// notices when its reads time out (2/3 of the session timeout), not at
// once, as in a real partition.
func (h *harness) Partition(_ context.Context, d backend.Driver) error {
	return h.c.onPath(d, func(np *netPath) { np.partition(true) })
}

func (h *harness) Heal(_ context.Context, d backend.Driver) error {
	return h.c.onPath(d, func(np *netPath) { np.partition(false) })
}

// DropNextReply loses the reply to d's next request other than a ping.
func (h *harness) DropNextReply(_ context.Context, d backend.Driver) error {
	return h.c.onPath(d, func(np *netPath) { np.dropAfter(0) })
}

func (h *harness) Dropped(d backend.Driver) int {
	np, err := h.c.pathOf(d)
	if err != nil {
		return 0
	}
	return np.droppedCount()
}

func (h *harness) Delete(_ context.Context, key string) error { return h.c.deleteHolder(key) }

// StopServer pauses every server (SIGSTOP or docker pause): unlike a stop,
// a pause keeps each server's address, which a container restart changes.
func (h *harness) StopServer(ctx context.Context) error {
	for i := range h.c.g.Nodes() {
		if err := h.c.pause(ctx, i); err != nil {
			return err
		}
	}
	return nil
}

// StartServer resumes what StopServer paused; it may be called again.
func (h *harness) StartServer(ctx context.Context) error {
	for i := range h.c.g.Nodes() {
		if err := h.c.resume(ctx, i); err != nil {
			return err
		}
	}
	return h.c.g.Wait(ctx)
}

// pause freezes node i unless it is already paused.
func (c *cluster) pause(ctx context.Context, i int) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.paused[i] {
		return nil
	}
	if err := c.g.Node(i).Pause(ctx); err != nil {
		return err
	}
	c.paused[i] = true
	return nil
}

// resume unfreezes node i if the harness paused it.
func (c *cluster) resume(ctx context.Context, i int) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.paused[i] {
		return nil
	}
	if err := c.g.Node(i).Resume(ctx); err != nil {
		return err
	}
	delete(c.paused, i)
	return nil
}

// Close closes the user-made connections (their drivers never do).
func (h *harness) Close() error {
	h.mu.Lock()
	users := h.users
	h.users = nil
	h.mu.Unlock()
	for _, conn := range users {
		conn.Close()
	}
	return nil
}
