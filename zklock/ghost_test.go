package zklock

import (
	"bytes"
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

	// A read hold: once a Write matches holdReadAfter, the next Read on
	// that connection returns only after readRelease is closed.
	holdReadAfter func(p []byte) bool
	readArmed     int // the connection whose next Read is held (0: none)
	readFired     bool
	readHeld      chan struct{} // closed when a Read is held
	readRelease   chan struct{}
}

func newWriteGate() *writeGate {
	return &writeGate{blocked: make(chan struct{}), release: make(chan struct{}),
		readHeld: make(chan struct{}), readRelease: make(chan struct{})}
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

func (c *gatedConn) Read(p []byte) (int, error) {
	n, err := c.Conn.Read(p)
	g := c.g
	g.mu.Lock()
	hold := g.readArmed == c.n && !g.readFired
	if hold {
		g.readFired = true
		close(g.readHeld)
	}
	g.mu.Unlock()
	if hold {
		<-g.readRelease
	}
	return n, err
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
	if g.holdReadAfter != nil && g.readArmed == 0 && g.holdReadAfter(p) {
		g.readArmed = c.n
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
// gatedDriver returns a driver with a session of its own, reaching the
// one server of c by three addresses (three proxies), as it would a
// three-server ensemble: go-zookeeper keeps its queued requests while it
// tries the addresses after the one it was connected to, and drops them
// (ErrNoServer) once it comes back round to that one. Its connections go
// through the returned gate; partition black-holes all three addresses.
func gatedDriver(t *testing.T, c *cluster, session time.Duration) (*Driver, *writeGate, func(on bool)) {
	t.Helper()
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
	d, err := dialDriver(ctxFor(t, 30*time.Second), urlConfig{
		hosts: hosts,
		dial:  dialConfig{timeout: session, connectTimeout: 30 * time.Second, dialer: gate.wrap(net.DialTimeout)},
		opts:  Options{Base: defaultBase},
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = d.Close() })
	return d, gate, partition
}

// expireSession makes d's session expire: d's connection dies (the gate's
// held Write fails), its addresses stay black-holed until the server has
// expired the session (its ephemeral marker is gone), then d connects
// again. Its first connection learns the session expired, its second gets
// a new one, in which go-zookeeper sends the requests it kept queued.
func expireSession(t *testing.T, c *cluster, gate *writeGate, partition func(bool), marker string) {
	t.Helper()
	partition(true)
	close(gate.release)
	if !eventually(15*time.Second, func() bool {
		ok, _, err := c.admin.Exists(marker)
		return err == nil && !ok
	}) {
		t.Fatal("the session did not expire")
	}
	partition(false)
}

// holdSendLoop holds d's send loop in the Write of a request, so that the
// requests made meanwhile wait in go-zookeeper's queue.
func holdSendLoop(t *testing.T, d *Driver, gate *writeGate) {
	t.Helper()
	gate.arm()
	go func() { _, _, _ = d.conn.Exists("/") }()
	select {
	case <-gate.blocked:
	case <-time.After(10 * time.Second):
		t.Fatal("the send loop was not held")
	}
}

// ephemeralMarker creates an ephemeral node in d's session, gone when the
// server has expired it.
func ephemeralMarker(t *testing.T, d *Driver, key string) string {
	t.Helper()
	marker := "/" + encodeKey(key) + ".marker"
	if _, err := d.conn.Create(marker, nil, zk.FlagEphemeral, zk.WorldACL(zk.PermAll)); err != nil {
		t.Fatal(err)
	}
	return marker
}

// ghostEnv is one server, A a gatedDriver of it with a session of
// ghostSession, and B a driver of its own.
type ghostEnv struct {
	c         *cluster
	key       string // unique to the test
	a, b      *Driver
	gate      *writeGate // A's
	partition func(on bool)
}

const ghostSession = time.Second

func newGhostEnv(t *testing.T) *ghostEnv {
	t.Helper()
	e := &ghostEnv{c: startCluster(t, 1), key: uniqueKey(t)}
	e.a, e.gate, e.partition = gatedDriver(t, e.c, ghostSession)
	e.b, _ = e.c.driverT(t, ctxFor(t, 30*time.Second), 10*time.Second)
	return e
}

// req is a request of e's key by owner.
func (e *ghostEnv) req(owner string) backend.Request {
	return backend.Request{Key: e.key, Owner: owner, TTL: 10 * time.Second}
}

// queueAfterLineRead runs attempt, an attempt of A's on the read-write
// lock of e's key, in a goroutine: once A has sent its read of the line,
// the reply is held until A's send loop is held, so that what attempt
// sends after the reply waits in go-zookeeper's queue.
func (e *ghostEnv) queueAfterLineRead(t *testing.T, attempt func()) {
	t.Helper()
	parent := []byte(e.a.rwParent(e.key))
	e.gate.mu.Lock()
	e.gate.holdReadAfter = func(p []byte) bool {
		return len(p) >= 12 && int32(binary.BigEndian.Uint32(p[8:12])) == 12 && bytes.Contains(p, parent)
	}
	e.gate.mu.Unlock()
	go attempt()
	select {
	case <-e.gate.readHeld:
	case <-time.After(10 * time.Second):
		t.Fatal("A's read of the line was not held")
	}
	holdSendLoop(t, e.a, e.gate)
	close(e.gate.readRelease)
	time.Sleep(200 * time.Millisecond) // queued (each test checks it was sent later)
}

func TestCreateInNextSessionReaped(t *testing.T) {
	e := newGhostEnv(t)
	c, key, a, b, gate, partition, session := e.c, e.key, e.a, e.b, e.gate, e.partition, ghostSession

	// B holds the lock, so that its container exists throughout and A's
	// create needs no other request.
	gb, err := b.TryAcquire(ctxFor(t, 10*time.Second), backend.Request{Key: key, Owner: "b", TTL: 10 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	marker := ephemeralMarker(t, a, key)
	first := a.conn.SessionID()

	// Hold A's send loop, then make the acquisition: its create waits in
	// go-zookeeper's queue.
	holdSendLoop(t, a, gate)
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
	expireSession(t, c, gate, partition, marker)
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

// TestRWFenceNotLowered: a writer's record of its token that go-zookeeper
// sends only after the writer's session expired, in the next session,
// does not lower the fence node below the token of a writer granted
// meanwhile: readers keep getting the last write's token.
//
// A's write grant records its token with a Set of the fence node. Held in
// go-zookeeper's queue while A's connection dies, the Set is sent in A's
// next session, after A's session expired (its node went with it) and B
// was granted the write side and recorded its higher token. An
// unconditional Set then put A's older token back, and every reader until
// the next writer got a token below a write already granted.
func TestRWFenceNotLowered(t *testing.T) {
	e := newGhostEnv(t)
	c, key, a, b, gate, partition, req := e.c, e.key, e.a, e.b, e.gate, e.partition, e.req
	// A first write makes the fence node, so that A's record is one Set.
	g, err := b.tryRW(ctxFor(t, 10*time.Second), req("b0"), backend.Write, false)
	if err != nil {
		t.Fatal(err)
	}
	if err := g.Lock.Release(ctxFor(t, 10*time.Second)); err != nil {
		t.Fatal(err)
	}
	marker := ephemeralMarker(t, a, key)
	first := a.conn.SessionID()

	// A's write attempt: the record of A's token, made after the reply to
	// its read of the line, waits in go-zookeeper's queue.
	tried := make(chan error, 1)
	e.queueAfterLineRead(t, func() {
		g, err := a.tryRW(ctxFor(t, 30*time.Second), req("a"), backend.Write, false)
		if err == nil {
			t.Logf("A's write grant, token %d", g.Token)
			_ = g.Lock.Release(ctxFor(t, 10*time.Second))
		}
		tried <- err
	})

	expireSession(t, c, gate, partition, marker)
	// A's session expired (its node with it): B takes the write side
	// while A connects again.
	gw, err := b.tryRW(ctxFor(t, 10*time.Second), req("b1"), backend.Write, false)
	if err != nil {
		t.Fatalf("B's write after A's session expired: %v", err)
	}
	t.Logf("B's write grant, token %d", gw.Token)
	select {
	case err = <-tried:
	case <-time.After(30 * time.Second):
		t.Fatal("A's TryAcquireRW did not return")
	}
	if (!gate.sentLater(5) && !gate.sentLater(14)) || a.conn.SessionID() == first {
		t.Fatalf("precondition: A's record of its token was not sent in A's next session (TryAcquireRW: %v)", err)
	}
	t.Logf("A's TryAcquireRW, its record sent in the next session: %v", err)
	if err := gw.Lock.Release(ctxFor(t, 10*time.Second)); err != nil {
		t.Fatal(err)
	}
	gr, err := b.tryRW(ctxFor(t, 10*time.Second), req("reader"), backend.Read, false)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = gr.Lock.Release(ctxFor(t, 10*time.Second)) }()
	if gr.Token != gw.Token {
		t.Fatalf("a reader after B's write got token %d, want B's %d (the last write's)", gr.Token, gw.Token)
	}
}

// TestRWReadGrantAfterExpiry: a reader whose read of the fence node
// go-zookeeper sends only in its next session, after its session expired
// (its node with it) and a writer was granted, is not granted: its node
// is gone.
func TestRWReadGrantAfterExpiry(t *testing.T) {
	e := newGhostEnv(t)
	c, key, a, b, gate, partition, req := e.c, e.key, e.a, e.b, e.gate, e.partition, e.req
	marker := ephemeralMarker(t, a, key)
	first := a.conn.SessionID()

	// A's read attempt: its read of the fence node, made after the reply
	// to its read of the line, waits in go-zookeeper's queue.
	type result struct {
		g   backend.Grant
		err error
	}
	tried := make(chan result, 1)
	e.queueAfterLineRead(t, func() {
		g, err := a.tryRW(ctxFor(t, 30*time.Second), req("a"), backend.Read, false)
		tried <- result{g, err}
	})

	expireSession(t, c, gate, partition, marker)
	gw, err := b.tryRW(ctxFor(t, 10*time.Second), req("b"), backend.Write, false)
	if err != nil {
		t.Fatalf("B's write after A's session expired: %v", err)
	}
	defer func() { _ = gw.Lock.Release(ctxFor(t, 10*time.Second)) }()
	var r result
	select {
	case r = <-tried:
	case <-time.After(30 * time.Second):
		t.Fatal("A's TryAcquireRW did not return")
	}
	if !gate.sentLater(4) || a.conn.SessionID() == first { // 4: getData
		t.Fatalf("precondition: A's read of the fence node was not sent in A's next session (TryAcquireRW: %v)", r.err)
	}
	if r.err == nil {
		_ = r.g.Lock.Release(ctxFor(t, 10*time.Second))
		t.Fatalf("A was granted the read side (token %d) with its node gone with its expired session, while B holds the write side (token %d)", r.g.Token, gw.Token)
	}
	if !errors.Is(r.err, backend.ErrLost) {
		t.Errorf("A's TryAcquireRW = %v, want ErrLost", r.err)
	}
}
