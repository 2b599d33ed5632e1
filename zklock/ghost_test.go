package zklock

import (
	"encoding/binary"
	"errors"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/distlock/distlock/backend"
	"github.com/distlock/distlock/sandbox"
)

// writeGate wraps a driver's connections (its zk.Dialer) so that a test can
// hold go-zookeeper's send loop inside one Write: requests made meanwhile
// wait in go-zookeeper's send queue, which outlives the connection, and are
// sent on the next one, in whatever session that one has.
type writeGate struct {
	mu       sync.Mutex
	armed    bool
	conns    int           // connections dialled
	firedOn  int           // the connection whose Write was held (0: none yet)
	blocked  chan struct{} // closed when a Write is held
	release  chan struct{} // closed to fail the held Write
	laterOps []int32       // opcodes written on connections after firedOn
}

func newWriteGate() *writeGate {
	return &writeGate{blocked: make(chan struct{}), release: make(chan struct{})}
}

func (g *writeGate) wrap(next zk.Dialer) zk.Dialer {
	return func(network, addr string, timeout time.Duration) (net.Conn, error) {
		c, err := next(network, addr, timeout)
		if err != nil {
			return nil, err
		}
		g.mu.Lock()
		g.conns++
		n := g.conns
		g.mu.Unlock()
		return &gatedConn{Conn: c, g: g, n: n}, nil
	}
}

// arm makes the next Write on the current connection wait for release.
func (g *writeGate) arm() {
	g.mu.Lock()
	g.armed = true
	g.mu.Unlock()
}

// sentLater reports whether a request with opcode op was written on a
// connection made after the held one.
func (g *writeGate) sentLater(op int32) bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	for _, o := range g.laterOps {
		if o == op {
			return true
		}
	}
	return false
}

type gatedConn struct {
	net.Conn
	g *writeGate
	n int
}

var errHeldWrite = errors.New("zklock test: held write abandoned")

func (c *gatedConn) Write(p []byte) (int, error) {
	g := c.g
	g.mu.Lock()
	hold := g.armed && g.firedOn == 0
	if hold {
		g.firedOn = c.n
		close(g.blocked)
	}
	if g.firedOn != 0 && c.n > g.firedOn && len(p) >= 12 {
		g.laterOps = append(g.laterOps, int32(binary.BigEndian.Uint32(p[8:12])))
	}
	g.mu.Unlock()
	if hold {
		<-g.release
		return 0, errHeldWrite
	}
	return c.Conn.Write(p)
}

// TestCreateInNextSessionReaped: an acquisition's create that go-zookeeper
// sends only after the session it was made in expired, in the session that
// replaced it, leaves no ghost node behind.
//
// go-zookeeper queues requests in a channel that outlives its connection:
// a request made while the send loop is stuck (here held in a Write; in
// production a write to a dead peer with full buffers, or the moment
// between the receive loop's end and the state's change) is sent on the
// next connection. If the old session expired meanwhile, that is a new
// session: the create succeeds there, the driver sees the session changed
// and reports an unknown outcome, and hands the node to the reaper with
// the old session's id. The reaper used to drop every orphan of a session
// other than the current one unseen ("its ephemeral node is gone"), so
// the node lived on in the new session: a ghost that held the lock, or
// queued for it, for as long as the driver lived.
func TestCreateInNextSessionReaped(t *testing.T) {
	c := startCluster(t, 1)
	key := uniqueKey(t)
	// A reaches the server by three addresses (three proxies), as it would
	// a three-server ensemble: go-zookeeper keeps its queued requests while
	// it tries the addresses after the one it was connected to, and drops
	// them (ErrNoServer) once it comes back round to that one.
	server := c.g.Addrs()[0]
	var proxies []*sandbox.Proxy
	var hosts []string
	for range 3 {
		p := sandbox.StartProxyT(t, func() string { return server })
		proxies = append(proxies, p)
		hosts = append(hosts, p.Addr())
	}
	partition := func(on bool) {
		for _, p := range proxies {
			if on {
				p.Blackhole(sandbox.Both)
			} else {
				p.Heal()
			}
		}
	}
	gate := newWriteGate()
	const session = time.Second
	a, err := dialDriver(ctxFor(t, 30*time.Second), urlConfig{
		hosts: hosts,
		dial:  dialConfig{timeout: session, connectTimeout: 30 * time.Second, dialer: gate.wrap(net.DialTimeout)},
		opts:  Options{Base: defaultBase},
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = a.Close() })
	b, _, err := c.newDriver(ctxFor(t, 30*time.Second), 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = b.Close() })

	// B holds the lock, so that its container exists throughout and A's
	// create needs no other request.
	gb, err := b.TryAcquire(ctxFor(t, 10*time.Second), backend.Request{Key: key, Owner: "b", TTL: 10 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	// An ephemeral node of A's first session shows when the server expired it.
	marker := defaultBase + "/" + key + ".marker"
	if _, err := a.conn.Create(marker, nil, zk.FlagEphemeral, zk.WorldACL(zk.PermAll)); err != nil {
		t.Fatal(err)
	}
	first := a.conn.SessionID()

	// Hold A's send loop in the Write of a request, then make the
	// acquisition: its create waits in go-zookeeper's queue.
	gate.arm()
	go func() { _, _, _ = a.conn.Exists("/") }()
	select {
	case <-gate.blocked:
	case <-time.After(10 * time.Second):
		t.Fatal("the send loop was not held")
	}
	tried := make(chan error, 1)
	go func() {
		_, err := a.TryAcquire(ctxFor(t, 30*time.Second), backend.Request{Key: key, Owner: "a", TTL: session})
		tried <- err
	}()
	time.Sleep(200 * time.Millisecond) // the create is queued (checked below: it was sent later)

	// The connection dies; A's next connection hangs in its handshake
	// until the server has expired A's session, then learns it expired,
	// and the one after gets a new session, in which the queued create is
	// sent.
	partition(true)
	close(gate.release)
	if !eventually(15*time.Second, func() bool {
		ok, _, err := c.admin.Exists(marker)
		return err == nil && !ok
	}) {
		t.Fatal("A's first session did not expire")
	}
	partition(false)
	select {
	case err = <-tried:
	case <-time.After(30 * time.Second):
		t.Fatal("TryAcquire did not return")
	}
	if !gate.sentLater(opcodeLockCreate) || a.conn.SessionID() == first {
		t.Fatalf("precondition: the create was not sent in A's next session (TryAcquire: %v)", err)
	}
	t.Logf("TryAcquire, its create sent in the next session: %v", err)

	if err := gb.Lock.Release(ctxFor(t, 10*time.Second)); err != nil {
		t.Fatal(err)
	}
	var last error
	if !eventually(5*time.Second, func() bool {
		g, err := b.TryAcquire(ctxFor(t, 10*time.Second), backend.Request{Key: key, Owner: "b", TTL: 10 * time.Second})
		if err != nil {
			last = err
			return false
		}
		_ = g.Lock.Release(ctxFor(t, 10*time.Second))
		return true
	}) {
		q, qerr := c.queue(key)
		t.Fatalf("a node of A's create, made in its next session %#x, holds the lock: queue %v (%v); B: %v",
			a.conn.SessionID(), q, qerr, last)
	}
}
