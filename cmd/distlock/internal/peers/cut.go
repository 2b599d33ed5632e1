package peers

import (
	"context"
	"errors"
	"net"
	"sync"
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
	conn, err := d.DialContext(ctx, network, addr)
	if err != nil || c == nil {
		return conn, err
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
