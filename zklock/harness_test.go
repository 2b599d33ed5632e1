package zklock

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"net"
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

// killSwitch is a dialer whose connections can be cut at once, as if the
// process had died: no closeSession reaches the server, so the session
// and its ephemeral nodes live on until the server expires it.
type killSwitch struct {
	mu      sync.Mutex
	dead    bool // killed for good
	blocked bool // partitioned: no new connections until unblocked
	conns   []net.Conn
	dropOp  int32       // opcode whose reply is to be lost; 0 for none
	didDrop atomic.Bool // a reply was lost
}

// opcodeLockCreate is the opcode of the request that creates a lock node:
// a multi (create + setData on the parent, for the token).
const opcodeLockCreate = 14

var errKilled = errors.New("zklock test: client killed")

func (k *killSwitch) dial(network, addr string, timeout time.Duration) (net.Conn, error) {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.dead || k.blocked {
		return nil, errKilled
	}
	c, err := net.DialTimeout(network, addr, timeout)
	if err != nil {
		return nil, err
	}
	fc := &faultConn{Conn: c, k: k}
	k.conns = append(k.conns, fc)
	return fc, nil
}

// block partitions the client (cutting its connections) or heals it.
func (k *killSwitch) block(on bool) {
	k.mu.Lock()
	k.blocked = on
	k.mu.Unlock()
	if on {
		k.cut(false)
	}
}

// dropAfter makes the connection drop right after the next request with
// opcode op reached the server, so its reply is lost.
func (k *killSwitch) dropAfter(op int32) {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.dropOp = op
	k.didDrop.Store(false)
}

func (k *killSwitch) dropped() bool { return k.didDrop.Load() }

// takeDrop reports whether a request with opcode op must lose its reply.
func (k *killSwitch) takeDrop(op int32) bool {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.dropOp == 0 || k.dropOp != op {
		return false
	}
	k.dropOp = 0
	return true
}

// faultConn loses every reply after a request chosen by dropAfter, then
// fails: the server has applied the request, the client never learns.
type faultConn struct {
	net.Conn
	k       *killSwitch
	swallow atomic.Bool
}

func (c *faultConn) Write(p []byte) (int, error) {
	if len(p) >= 12 && c.k.takeDrop(int32(binary.BigEndian.Uint32(p[8:12]))) {
		c.swallow.Store(true)
		c.k.didDrop.Store(true)
	}
	return c.Conn.Write(p)
}

func (c *faultConn) Read(p []byte) (int, error) {
	n, err := c.Conn.Read(p)
	if c.swallow.Load() {
		_ = c.Conn.Close()
		return 0, errors.New("zklock test: reply lost")
	}
	return n, err
}

// cut closes every live connection; later ones succeed again (a network
// blip), unless kill was called.
func (k *killSwitch) cut(kill bool) {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.dead = k.dead || kill
	for _, c := range k.conns {
		_ = c.Close()
	}
	k.conns = nil
}

// cluster is a sandbox ZooKeeper group with an admin session for
// server-side faults.
type cluster struct {
	g     *sandbox.Group
	admin *zk.Conn

	mu     sync.Mutex
	kills  map[backend.Driver]*killSwitch
	paused map[int]bool // nodes paused by the harness
}

func startCluster(t *testing.T, nodes int) *cluster {
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
	return &cluster{g: g, admin: admin, kills: map[backend.Driver]*killSwitch{}, paused: map[int]bool{}}
}

// newDriver makes a driver with its own session through a kill switch.
func (c *cluster) newDriver(ctx context.Context, session time.Duration) (*Driver, *killSwitch, error) {
	k := &killSwitch{}
	cfg := urlConfig{
		hosts: c.g.Addrs(),
		dial:  dialConfig{timeout: session, connectTimeout: 30 * time.Second, dialer: k.dial},
		opts:  Options{Base: defaultBase},
	}
	d, err := dialDriver(ctx, cfg)
	if err != nil {
		return nil, nil, err
	}
	c.mu.Lock()
	c.kills[d] = k
	c.mu.Unlock()
	return d, k, nil
}

func (c *cluster) killSwitch(d backend.Driver) (*killSwitch, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	k, ok := c.kills[d]
	if !ok {
		return nil, fmt.Errorf("driver %p was not made by this cluster", d)
	}
	return k, nil
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

// harness adapts a cluster to conformance.Harness and ServerControl.
type harness struct{ c *cluster }

func (h harness) NewDriver(ctx context.Context) (backend.Driver, error) {
	d, _, err := h.c.newDriver(ctx, testSession)
	return d, err
}

func (h harness) TTL() time.Duration { return testSession }

func (h harness) Kill(_ context.Context, d backend.Driver) error {
	k, err := h.c.killSwitch(d)
	if err != nil {
		return err
	}
	k.cut(true)
	return nil
}

func (h harness) Delete(_ context.Context, key string) error { return h.c.deleteHolder(key) }

// StopServer pauses every server (SIGSTOP or docker pause): unlike a stop,
// a pause keeps each server's address, which a container restart changes.
func (h harness) StopServer(ctx context.Context) error {
	for i := range h.c.g.Nodes() {
		if err := h.c.pause(ctx, i); err != nil {
			return err
		}
	}
	return nil
}

// StartServer resumes what StopServer paused; it may be called again.
func (h harness) StartServer(ctx context.Context) error {
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

func (h harness) Close() error { return nil }
