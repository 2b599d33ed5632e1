package zklock

import (
	"context"
	"encoding/binary"
	"fmt"
	"log/slog"
	"net"
	"sync/atomic"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/distlock/distlock/backend"
)

// grantedTimeout learns the session timeout the server granted by reading
// it from the connect response at the start of every connection: the
// go-zookeeper client does not expose it, and a server may grant less than
// was asked.
type grantedTimeout struct {
	asked time.Duration
	ms    atomic.Int64 // last granted timeout in ms; 0 until known
}

// get returns the granted timeout, or the asked one until a server answered.
func (g *grantedTimeout) get() time.Duration {
	if ms := g.ms.Load(); ms > 0 {
		return time.Duration(ms) * time.Millisecond
	}
	return g.asked
}

// wrap returns a dialer that records the granted timeout of every
// connection next makes.
func (g *grantedTimeout) wrap(next zk.Dialer) zk.Dialer {
	return func(network, addr string, timeout time.Duration) (net.Conn, error) {
		c, err := next(network, addr, timeout)
		if err != nil {
			return nil, err
		}
		return &sniffConn{Conn: c, g: g}, nil
	}
}

// sniffConn copies the first 12 bytes read from the server: the frame
// length, protocol version and session timeout of the connect response.
// go-zookeeper reads a connection from one goroutine at a time, the
// handshake before the receive loop starts, so no locking is needed.
type sniffConn struct {
	net.Conn
	g    *grantedTimeout
	head [12]byte
	got  int
}

func (c *sniffConn) Read(p []byte) (int, error) {
	n, err := c.Conn.Read(p)
	if c.got < len(c.head) && n > 0 {
		c.got += copy(c.head[c.got:], p[:n])
		if c.got == len(c.head) {
			if ms := int64(int32(binary.BigEndian.Uint32(c.head[8:12]))); ms > 0 {
				c.g.ms.Store(ms)
			}
		}
	}
	return n, err
}

// dialConfig is what connect needs besides the hosts.
type dialConfig struct {
	timeout        time.Duration // session timeout to ask for
	connectTimeout time.Duration // bound on the first session
	dialer         zk.Dialer     // nil for net.DialTimeout
	user, password string        // digest auth when user != ""
}

// connect opens a session and waits until the server granted it (bounded by
// ctx and cfg.connectTimeout). It returns the connection and a function
// reporting the granted session timeout.
func connect(ctx context.Context, hosts []string, cfg dialConfig) (*zk.Conn, func() time.Duration, error) {
	g := &grantedTimeout{asked: cfg.timeout}
	dial := cfg.dialer
	if dial == nil {
		dial = net.DialTimeout
	}
	conn, events, err := zk.Connect(hosts, cfg.timeout,
		zk.WithDialer(g.wrap(dial)), zk.WithLogger(debugLogger{}), zk.WithLogInfo(false))
	if err != nil {
		return nil, nil, fmt.Errorf("zklock: connect: %w: %w", backend.ErrInvalidConfig, err)
	}
	ctx, cancel := context.WithTimeout(ctx, cfg.connectTimeout)
	defer cancel()
	if err := awaitSession(ctx, events); err != nil {
		conn.Close()
		return nil, nil, fmt.Errorf("zklock: connect to %v: %w: %w", hosts, backend.ErrUnavailable, err)
	}
	if cfg.user != "" {
		if err := conn.AddAuth("digest", []byte(cfg.user+":"+cfg.password)); err != nil {
			conn.Close()
			return nil, nil, fmt.Errorf("zklock: digest auth as %q: %w: %w", cfg.user, kind(err), err)
		}
	}
	return conn, g.get, nil
}

// awaitSession reads session events until the session is established.
func awaitSession(ctx context.Context, events <-chan zk.Event) error {
	for {
		select {
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

// debugLogger sends go-zookeeper's messages to slog at debug level.
type debugLogger struct{}

func (debugLogger) Printf(format string, args ...any) {
	slog.Debug("zklock: go-zookeeper: " + fmt.Sprintf(format, args...))
}
