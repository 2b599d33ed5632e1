package zklock

import (
	"context"
	"crypto/tls"
	"encoding/binary"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/distlock/distlock/backend"
)

// session is what the driver learns about a connection it opened itself,
// through a wrapper around each of its TCP connections:
//
//   - the session timeout the server granted, read from the connect
//     response: go-zookeeper does not expose it, and a server may grant
//     less than was asked;
//   - a gate that works around a data race in go-zookeeper v1.0.4: after
//     a reconnect its loop goroutine reads Conn.lastZxid to re-register the
//     watches (sendSetWatches) while the new receive goroutine may already
//     write it for a reply (go-zookeeper PR #35, unmerged). When the driver
//     has watches, the wrapper holds back replies on a new connection until
//     that connection's setWatches request has been written, which orders
//     the read before every write. A setWatches request made for an earlier
//     connection that died before sending it is sent first on the next one
//     and does not open the gate: requests are sent in the order they are
//     made, so connection k's is the made-th written.
type session struct {
	asked   time.Duration
	ms      atomic.Int64 // last granted timeout in ms; 0 until known
	watches atomic.Int64 // watches the driver has set and not seen fire
	// gen counts the connections whose handshake completed (owned
	// connections), or the looks at a connection passed to New that found
	// it without a session: a renewal round trusts a node's watch only if
	// it was set in the generation the round runs in (refreshall.go).
	gen atomic.Uint64

	lastRead atomic.Int64                   // unix ns of the last read that returned data; 0 if unknown
	onState  atomic.Pointer[func(zk.State)] // the driver's stateChanged, once it exists

	logger     atomic.Pointer[slog.Logger] // the Locker's (Driver.SetLogger); nil: log nothing
	lastFail   atomic.Pointer[string]      // go-zookeeper's last "failed to connect"/"authentication failed"
	refusedMu  sync.Mutex
	refused    map[string]error // servers whose certificate a TLS handshake refused
	allRefused chan struct{}    // closed once every server's certificate was refused
	hosts      int              // servers in the connection string

	mu   sync.Mutex
	made int          // setWatches requests go-zookeeper made (one per armed connection)
	sent int          // setWatches requests resolved: written, or failed unsent
	cur  *sessionConn // the armed connection waiting at its gate, if any
}

// Printf receives go-zookeeper's log messages (it is the connection's
// zk.Logger). "Failed to set previous watches" comes from the goroutine that
// tried to send a setWatches request and could not (the connection closed
// first): that request is resolved without a write.
func (s *session) Printf(format string, args ...any) {
	msg := fmt.Sprintf(format, args...)
	if l := s.logger.Load(); l != nil {
		l.Debug("zklock: go-zookeeper: " + msg)
	}
	if strings.HasPrefix(format, "failed to connect") || strings.HasPrefix(format, "authentication failed") {
		s.lastFail.Store(&msg)
	}
	if strings.HasPrefix(format, "Failed to set previous watches") {
		s.mu.Lock()
		s.resolvedLocked()
		s.mu.Unlock()
	}
}

// resolvedLocked counts one setWatches request resolved and opens the gate
// of the connection it was for. s.mu is held.
func (s *session) resolvedLocked() {
	s.sent++
	if c := s.cur; c != nil && s.sent >= c.target && !c.gateOpen {
		c.gateOpen = true
		close(c.gate)
		s.cur = nil
	}
}

// gateTimeout bounds how long replies wait for the setWatches request when
// the driver's counts are stale (its watches fired meanwhile, or a pending
// setWatches request was dropped unsent).
const gateTimeout = time.Second

// opSetWatches is the opcode of ZooKeeper's setWatches request.
const opSetWatches = 101

// lastContact returns when the server was last heard from on a connection
// the driver opened, or zero for a connection passed to New.
func (s *session) lastContact() time.Time {
	if ns := s.lastRead.Load(); ns != 0 {
		return time.Unix(0, ns)
	}
	return time.Time{}
}

// event is the connection's event callback: state changes go to the
// driver. go-zookeeper calls it from one goroutine at a time.
func (s *session) event(ev zk.Event) {
	if ev.Type != zk.EventSession {
		return
	}
	if f := s.onState.Load(); f != nil {
		(*f)(ev.State)
	}
}

// timeout returns the granted timeout, or the asked one until known.
func (s *session) timeout() time.Duration {
	if ms := s.ms.Load(); ms > 0 {
		return time.Duration(ms) * time.Millisecond
	}
	return s.asked
}

// wrap returns a dialer whose connections report to s. go-zookeeper dials
// a new connection only after the previous one ended.
func (s *session) wrap(next zk.Dialer) zk.Dialer {
	return func(network, addr string, timeout time.Duration) (net.Conn, error) {
		c, err := next(network, addr, timeout)
		if err != nil {
			s.dialFailed(addr, err)
			return nil, err
		}
		return &sessionConn{Conn: c, s: s, gate: make(chan struct{})}, nil
	}
}

// dialFailed notes a server whose certificate was refused; when every
// server's was, connect gives up at once.
func (s *session) dialFailed(addr string, err error) {
	var te *tlsError
	if !errors.As(err, &te) || !te.verification() {
		return
	}
	s.refusedMu.Lock()
	defer s.refusedMu.Unlock()
	if s.refused == nil || s.allRefused == nil {
		return
	}
	s.refused[addr] = err
	if len(s.refused) >= s.hosts {
		select {
		case <-s.allRefused:
		default:
			close(s.allRefused)
		}
	}
}

// sessionConn watches one TCP connection of a session. go-zookeeper reads
// a connection from one goroutine at a time (the handshake, then the
// receive loop), so the read-side fields need no lock.
type sessionConn struct {
	net.Conn
	s *session

	head   [12]byte // frame length, protocol version, timeout of the connect response
	got    int      // handshake bytes read so far
	hsLen  int      // length of the connect response with its frame; 0 until known
	passed bool     // the receive loop passed the gate

	// Guarded by s.mu.
	armed    bool // the driver had watches when the handshake completed
	target   int  // s.sent at which this connection's setWatches is out
	gate     chan struct{}
	gateOpen bool
}

func (c *sessionConn) Read(p []byte) (int, error) {
	if c.hsLen > 0 && c.got >= c.hsLen && !c.passed {
		c.passed = true
		c.s.mu.Lock()
		armed := c.armed
		c.s.mu.Unlock()
		if armed {
			c.awaitGate()
		}
	}
	n, err := c.Conn.Read(p)
	if n > 0 {
		c.s.lastRead.Store(time.Now().UnixNano())
	}
	if (c.hsLen == 0 || c.got < c.hsLen) && n > 0 {
		c.handshakeRead(p[:n])
	}
	return n, err
}

// handshakeRead follows the connect response as go-zookeeper reads it.
func (c *sessionConn) handshakeRead(p []byte) {
	if c.got < len(c.head) {
		copy(c.head[c.got:], p)
	}
	before := c.got
	c.got += len(p)
	if before < 4 && c.got >= 4 {
		c.hsLen = 4 + int(binary.BigEndian.Uint32(c.head[0:4]))
	}
	if before < len(c.head) && c.got >= len(c.head) {
		if ms := int64(int32(binary.BigEndian.Uint32(c.head[8:12]))); ms > 0 {
			c.s.ms.Store(ms)
		}
	}
	if c.hsLen > 0 && c.got >= c.hsLen {
		// Before go-zookeeper looks at its watches: the driver's count is
		// never below go-zookeeper's.
		c.s.gen.Add(1)
		c.s.mu.Lock()
		if c.s.watches.Load() > 0 {
			c.s.made++
			c.armed, c.target = true, c.s.made
			c.s.cur = c
		}
		c.s.mu.Unlock()
	}
}

// awaitGate waits until this connection's setWatches request is written.
// After gateTimeout it gives up and resynchronises the counts (a request
// was dropped unsent, or none was made because the watches had fired).
func (c *sessionConn) awaitGate() {
	t := time.NewTimer(gateTimeout)
	defer t.Stop()
	select {
	case <-c.gate:
	case <-t.C:
		c.s.mu.Lock()
		c.s.sent = max(c.s.sent, c.target)
		if c.s.cur == c {
			c.s.cur = nil
		}
		c.s.mu.Unlock()
	}
}

func (c *sessionConn) Write(p []byte) (int, error) {
	if len(p) >= 12 && int32(binary.BigEndian.Uint32(p[8:12])) == opSetWatches {
		c.s.mu.Lock()
		c.s.resolvedLocked()
		c.s.mu.Unlock()
	}
	return c.Conn.Write(p)
}

// dialConfig is what connect needs besides the hosts.
type dialConfig struct {
	timeout        time.Duration // session timeout to ask for
	connectTimeout time.Duration // bound on the first session
	dialer         zk.Dialer     // nil for net.DialTimeout
	user, password string        // digest auth when user != ""
	tls            *tls.Config   // zks://: TLS with this configuration
}

// connect opens a session and waits until the server granted it (bounded by
// ctx and cfg.connectTimeout).
func connect(ctx context.Context, hosts []string, cfg dialConfig) (*zk.Conn, *session, error) {
	g := &session{asked: cfg.timeout, refused: map[string]error{}, allRefused: make(chan struct{}), hosts: len(hosts)}
	dial := cfg.dialer
	if dial == nil {
		dial = net.DialTimeout
	}
	if cfg.tls != nil {
		dial = tlsDialer(cfg.tls, dial)
	}
	conn, events, err := zk.Connect(hosts, cfg.timeout,
		zk.WithDialer(g.wrap(dial)), zk.WithLogger(g), zk.WithLogInfo(false), zk.WithEventCallback(g.event))
	if err != nil {
		return nil, nil, fmt.Errorf("zklock: connect: %w: %w", backend.ErrInvalidConfig, err)
	}
	ctx, cancel := context.WithTimeout(ctx, cfg.connectTimeout)
	defer cancel()
	actx, acancel := leaveForClose(ctx)
	defer acancel()
	if err := awaitSession(actx, events, g.allRefused); err != nil {
		conn.Close()
		if errors.Is(err, errCertRefused) {
			g.refusedMu.Lock()
			defer g.refusedMu.Unlock()
			errs := make([]error, 0, len(g.refused))
			for _, h := range hosts {
				if e, ok := g.refused[h]; ok {
					errs = append(errs, e)
				}
			}
			return nil, nil, fmt.Errorf("zklock: connect to %v: %w: %w: %w", hosts, backend.ErrInvalidConfig, err, errors.Join(errs...))
		}
		if last := g.lastFail.Load(); last != nil {
			hint := ""
			if cfg.tls == nil && strings.HasPrefix(*last, "authentication failed") {
				hint = " (the server closed the connection during the session handshake: if the port serves TLS only, use zks://)"
			}
			return nil, nil, fmt.Errorf("zklock: connect to %v: %w: %w; last attempt: %s%s", hosts, backend.ErrUnavailable, err, *last, hint)
		}
		return nil, nil, fmt.Errorf("zklock: connect to %v: %w: %w", hosts, backend.ErrUnavailable, err)
	}
	if cfg.user != "" {
		if err := conn.AddAuth("digest", []byte(cfg.user+":"+cfg.password)); err != nil {
			conn.Close()
			return nil, nil, fmt.Errorf("zklock: digest auth as %q: %w: %w", cfg.user, kind(err), err)
		}
	}
	return conn, g, nil
}

// closeWait is how long go-zookeeper's Close waits for its close request
// when no connection carries it (it has no way to be told sooner).
const closeWait = time.Second

// leaveForClose returns ctx with its deadline moved earlier, so that the
// Close after a failed wait for a session still ends within ctx: a
// deadline closeWait earlier, but never less than half the time left.
func leaveForClose(ctx context.Context) (context.Context, context.CancelFunc) {
	dl, ok := ctx.Deadline()
	if !ok {
		return context.WithCancel(ctx)
	}
	left := time.Until(dl)
	return context.WithDeadline(ctx, time.Now().Add(max(left-closeWait, left/2)))
}

// errCertRefused reports that the TLS handshake refused every server's
// certificate.
var errCertRefused = errors.New("every server's TLS certificate was refused")

// awaitSession reads session events until the session is established, or
// refused is closed.
func awaitSession(ctx context.Context, events <-chan zk.Event, refused <-chan struct{}) error {
	for {
		select {
		case <-refused:
			return errCertRefused
		case ev, ok := <-events:
			if !ok {
				return zk.ErrClosing
			}
			if ev.Type == zk.EventSession && ev.State == zk.StateHasSession {
				return nil
			}
		case <-ctx.Done():
			return fmt.Errorf("no session established: %w", context.Cause(ctx))
		}
	}
}
