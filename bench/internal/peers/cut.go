package peers

import (
	"context"
	"errors"
	"net"
	"sync"
	"sync/atomic"
)

// errCut is what a cut client's dials return.
var errCut = errors.New("peers: connection cut (simulated crash)")

// cutter dials a client's connections and can cut them all at once, as
// the kernel closes a killed process's sockets. A nil cutter dials plainly.
type cutter struct {
	mu    sync.Mutex
	cut   bool
	conns []net.Conn
}

func (c *cutter) dial(ctx context.Context, network, addr string) (net.Conn, error) {
	if c != nil {
		c.mu.Lock()
		cut := c.cut
		c.mu.Unlock()
		if cut {
			return nil, errCut
		}
	}
	var d net.Dialer
	raw, err := d.DialContext(ctx, network, addr)
	if err != nil {
		return nil, err
	}
	conn := net.Conn(&tripConn{Conn: raw})
	if c == nil {
		return conn, nil
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.cut {
		conn.Close()
		return nil, errCut
	}
	c.conns = append(c.conns, conn)
	return conn, nil
}

// cutAll closes every connection dialled so far and refuses later dials.
func (c *cutter) cutAll() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.cut = true
	for _, conn := range c.conns {
		_ = conn.Close()
	}
	c.conns = nil
}

// wireTrips counts the round trips of every connection the clients of this
// package dialled: see [RoundTrips].
var wireTrips atomic.Int64

// RoundTrips returns how many round trips the clients this package made
// (peers, floors, distlock made by New) have had with their servers so far,
// counted on the wire: a write on a connection after it last read (or
// first) starts one. That is exact for request-reply protocols (Redis,
// MySQL, ZooKeeper without watches firing) and counts a little more for
// gRPC (etcd), whose flow-control frames and pushed watch events look like
// more turns. Pings and renewals in the background count too.
func RoundTrips() float64 { return float64(wireTrips.Load()) }

// tripConn counts round trips in wireTrips.
type tripConn struct {
	net.Conn
	writing atomic.Bool
}

func (c *tripConn) Write(p []byte) (int, error) {
	if !c.writing.Swap(true) {
		wireTrips.Add(1)
	}
	return c.Conn.Write(p)
}

func (c *tripConn) Read(p []byte) (int, error) {
	n, err := c.Conn.Read(p)
	if n > 0 {
		c.writing.Store(false)
	}
	return n, err
}
