package zklock

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/distlock/distlock/backend"
)

// defaultBase is the node under which locks live when no base is given.
const defaultBase = "/distlock"

// Options configures a Driver made by New. The zero value is valid except
// for SessionTimeout, which New needs.
type Options struct {
	// Base is the node under which every lock lives, e.g. "/app/locks"
	// (default "/distlock"). It and its ancestors are created on first use.
	Base string
	// SessionTimeout is the session timeout the server granted to the
	// connection; every lease is vouched for 5/12 of it after each check
	// (see the package doc). Pass the value given to
	// zk.Connect, and make sure the server's minSessionTimeout and
	// maxSessionTimeout allow it (a server that grants less would let the
	// client trust a lease longer than the session lives).
	SessionTimeout time.Duration
	// ACL is given to every node the driver creates: the base path, the
	// per-key container nodes and the lock nodes. Default: world:anyone
	// with every permission (zk.WorldACL(zk.PermAll)). Use zk.AuthACL with
	// digest authentication on the connection so that other clients cannot
	// delete your nodes (deleting a node needs DELETE on its parent).
	ACL []zk.ACL
	// WatchRenewals makes a renewal round of a connection passed to New
	// cost two requests for the whole session (a Sync and one read) plus one
	// per node whose watch fired, instead of a Sync and one read per lease
	// (docs/zookeeper.md, "A round of renewals"). Each held node carries a
	// watch, set by its first round, and a round trusts the watches only
	// while the connection is the one they were set on: after a reconnect
	// the next round checks every node on its own. The driver sees
	// reconnects of conn only by looking at conn.State() a twentieth of the
	// session timeout apart, so a reconnect between two looks goes unseen,
	// and the watches it re-registers (go-zookeeper's setWatches, with its
	// unguarded read of the last zxid: see New) are trusted: a node deleted
	// behind its holder's back during such a blip may be reported a round
	// late, or, if go-zookeeper's race made it skip the node's watch, not
	// until the node's queue changes again. Connections distlock.Open makes
	// always renew this way: the driver sees each of their handshakes.
	WatchRenewals bool
}

// Driver is a distlock backend.Driver over one ZooKeeper session. All its
// locks share the session: they live while it lives. It is safe for
// concurrent use.
type Driver struct {
	routes // the entry points (kinds.go)

	conn    *zk.Conn
	owned   bool // Close closes conn
	base    string
	acl     []zk.ACL
	timeout func() time.Duration // the granted session timeout
	sess    *session             // what the driver learns of its connection
	// watchRounds: a renewal round confirms the session once and relies on
	// the nodes' watches (refreshall.go): always on owned connections, on a
	// connection passed to New with Options.WatchRenewals.
	watchRounds bool

	noContainers atomic.Bool // the server rejected container nodes
	orphans      orphans

	heldMu sync.Mutex
	held   *backend.HeldSet[*lockNode] // the current session's locks (contact.go)

	closing  chan struct{}
	closeCtx context.Context // ends when closing is closed
	mu       sync.Mutex      // guards closed and the Add side of wg and calls
	closed   bool
	wg       sync.WaitGroup // the driver's own goroutines
	calls    sync.WaitGroup // goroutines running a go-zookeeper call for do
	endCtx   context.CancelFunc

	warnings []string // what New found wrong, logged by SetLogger
}

// New returns a Driver over conn, a go-zookeeper connection the caller
// made (zk.Connect(servers, sessionTimeout, ...)) and keeps owning. The
// driver never closes conn: Close stops only the driver's own goroutines,
// and the locks it still holds live on until conn's session ends.
// opts.SessionTimeout is required.
//
// What the driver needs from conn:
//
//   - opts.SessionTimeout must be what the server granted, and
//     go-zookeeper does not say what that was: pass the value given to
//     zk.Connect and make sure the servers' minSessionTimeout and
//     maxSessionTimeout (2 and 20 ticks: 4 s and 40 s at the default
//     tickTime of 2 s) allow it. A server that grants more only makes the
//     leases shorter than they could be; one that grants less makes every
//     lease trusted for longer than the session is sure to live, so
//     another client may be granted the lock before this one reports the
//     loss. A timeout above 40 s is logged as a warning (through the
//     Locker's logger) for that reason. distlock.Open reads the granted
//     value from the server's answer instead.
//   - Nothing else: every lease is vouched for 5/12 of the session
//     timeout after each renewal (see the package doc), and the portable
//     layer ends it at that deadline whether or not a call is still out.
//     go-zookeeper's calls take no ctx and no per-call timeout, so the
//     driver cannot bound them on conn: it gives up on a call when its
//     ctx ends and leaves it to go-zookeeper, which fails a request sent
//     once its receive timeout (2/3 of the session timeout) passes with
//     nothing from the server. Close does not wait for such calls.
//   - conn's events stay the caller's: the driver polls conn.State and
//     conn.SessionID a twentieth of the session timeout apart. A lost
//     connection puts the leases in doubt with the validity of their last
//     renewal; a new session id means the old session expired, and its
//     locks are lost. An event channel nobody reads is harmless
//     (go-zookeeper drops events it cannot deliver), but an event callback
//     (zk.WithEventCallback) runs on go-zookeeper's receive goroutine:
//     while it blocks, no reply is read, renewals' included, and the
//     leases end in doubt. conn keeps its own logger (SetLogger concerns
//     only connections distlock.Open made).
//
// Sharing conn with the service's other work: the locks live in conn's
// session, with the service's own ephemeral nodes and watches, and end
// with it. Close the Locker before conn: conn.Close ends the session on the
// server, which frees every lock at once, while the driver cannot tell a
// closed connection from a lost one and reports its leases held, then in
// doubt, until their deadline (up to 5/12 of the session timeout), when
// another client may hold them already. Requests share one connection and
// are answered in order, so a large read of the service's delays the
// renewals queued behind it (their validity counts from their send time,
// so this costs doubt, not safety). The connections distlock.Open makes
// work around a data race of go-zookeeper v1.0.4 after a reconnect with
// watches set (its PR #35; see session.go); conn does not.
//
// While conn has no session (still connecting, or reconnecting), the
// driver's calls fail at once with ErrUnavailable rather than queue: wait
// for zk.StateHasSession on conn's event channel before the first
// TryAcquire (Acquire retries by itself).
func New(conn *zk.Conn, opts *Options) (*Driver, error) {
	if conn == nil {
		return nil, fmt.Errorf("zklock: New: %w: nil *zk.Conn", backend.ErrInvalidConfig)
	}
	var o Options
	if opts != nil {
		o = *opts
	}
	if o.SessionTimeout <= 0 {
		return nil, fmt.Errorf("zklock: New: %w: Options.SessionTimeout is required (the session timeout the server granted)", backend.ErrInvalidConfig)
	}
	d, err := newDriver(conn, o, false, &session{asked: o.SessionTimeout})
	if err != nil {
		return nil, err
	}
	if o.SessionTimeout > maxDefaultSession {
		d.warnings = append(d.warnings, fmt.Sprintf("zklock: Options.SessionTimeout %v is above %v, the longest session a ZooKeeper server grants with default settings (maxSessionTimeout 20 ticks of 2 s); the driver cannot learn the granted timeout from a connection passed to New, so if the server granted less, every lease is trusted for longer than the session is sure to live: make sure the servers' maxSessionTimeout allows %v, or use distlock.Open, which reads the granted timeout",
			o.SessionTimeout, maxDefaultSession, o.SessionTimeout))
	}
	return d, nil
}

// maxDefaultSession is the longest session timeout a ZooKeeper server
// grants with default settings: maxSessionTimeout is 20 ticks, and
// tickTime 2 s.
const maxDefaultSession = 40 * time.Second

// newDriver makes a driver; owned drivers opened conn with s's dialer.
func newDriver(conn *zk.Conn, o Options, owned bool, s *session) (*Driver, error) {
	base, err := cleanBase(o.Base)
	if err != nil {
		return nil, fmt.Errorf("zklock: %w: %w", backend.ErrInvalidConfig, err)
	}
	acl := o.ACL
	if len(acl) == 0 {
		acl = zk.WorldACL(zk.PermAll)
	}
	d := &Driver{conn: conn, owned: owned, base: base, acl: acl, timeout: s.timeout, sess: s, watchRounds: owned || o.WatchRenewals, closing: make(chan struct{})}
	d.routes = byKind.Waiting(d)
	d.closeCtx, d.endCtx = context.WithCancel(context.Background())
	d.orphans.init()
	d.held = &backend.HeldSet[*lockNode]{}
	d.goTracked(d.reap)
	if owned {
		f := d.stateChanged
		s.onState.Store(&f)
	} else {
		every := pollEvery(d.timeout())
		d.goTracked(func() { d.pollState(every) })
	}
	return d, nil
}

// SetLogger implements backend.Logging: go-zookeeper's messages about a
// connection the driver made (URL-opened) go to l at DEBUG. A connection
// given to New keeps the logger it was made with. What New found wrong
// with its options is logged to l at WARN.
func (d *Driver) SetLogger(l *slog.Logger) {
	d.sess.logger.Store(l)
	if l == nil {
		return
	}
	for _, w := range d.warnings {
		l.Warn(w)
	}
}

// Capabilities reports a fair queue whose locks live as long as the
// driver's session; the TTL of every lock is 5/12 of the session timeout
// (see vouchNum). Counting
// semaphores are native and fair (semaphore.go).
func (d *Driver) Capabilities() backend.Capabilities {
	return backend.Capabilities{
		Name:         "zookeeper",
		Wait:         backend.WaitQueue,
		Lifetime:     backend.LifetimeSession,
		PerLockTTL:   false,
		MaxTTL:       backend.TTLLimit, // requests' TTLs are not used: every lock has the session's
		Fair:         true,
		Replication:  "majority quorum (Zab)",
		BatchRefresh: true,              // refreshall.go
		Inspect:      true,              // inspect.go
		ForceRelease: true,              // force.go
		RW:           backend.WaitQueue, // rwlock.go
		Values:       true,              // announce.go
		Watch:        true,
		// Every call returns by its ctx's end: go-zookeeper takes no ctx,
		// so each runs on a goroutine of the driver's own (do).
		CtxBounded: true,
		Server:     d.server(), // endpoint.go

		// Native semaphores (semaphore.go), fair: in sequence order.
		Semaphore:     backend.WaitQueue,
		SemaphoreFair: true,
	}
}

// Close stops the driver's goroutines and, if the driver opened its
// connection itself (distlock.Open), closes it, which ends the session and
// with it every lock still held. A connection passed to New stays open.
//
// go-zookeeper's calls take no ctx, and on a connection passed to New the
// driver cannot cut them short by closing it: Close does not wait for the
// calls still out there (a Refresh or Release its caller gave up on while
// the server did not answer). They end when go-zookeeper ends them (its
// receive timeout, 2/3 of the session timeout, fails a request sent; a
// queued one may wait for the next connection's handshake) or when the
// connection is closed; what they leave behind (a lock node of an
// abandoned acquisition) lives until the session ends.
func (d *Driver) Close() error {
	d.mu.Lock()
	if d.closed {
		d.mu.Unlock()
		return fmt.Errorf("zklock: close: %w", backend.ErrClosed)
	}
	d.closed = true
	close(d.closing)
	d.endCtx()
	d.mu.Unlock()
	if d.owned {
		d.conn.Close()
		d.calls.Wait() // go-zookeeper fails them at once once closed
	}
	d.wg.Wait()
	return nil
}
