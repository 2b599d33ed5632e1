package redistest

import (
	"bytes"
	"errors"
	"slices"
	"sync"

	"github.com/distlock/distlock/sandbox"
)

// paths are one driver's proxies, one per node it talks to. A cluster
// client learns node addresses from the cluster itself, so its proxies are
// made on first dial of each address.
type paths struct {
	mu          sync.Mutex
	byAddr      map[string]*sandbox.Proxy // cluster: by the node address the client dials
	all         []*sandbox.Proxy
	partitioned bool
	closed      bool
}

func newPaths() *paths { return &paths{byAddr: map[string]*sandbox.Proxy{}} }

// add makes a proxy to target (asked per connection: a container's port
// changes after a restart), cut at once if the driver is partitioned.
func (ps *paths) add(target func() string) (*sandbox.Proxy, error) {
	p, err := sandbox.StartProxy(target)
	if err != nil {
		return nil, err
	}
	ps.mu.Lock()
	defer ps.mu.Unlock()
	if ps.closed {
		_ = p.Close()
		return nil, errors.New("redislock test: driver's proxies closed")
	}
	if ps.partitioned {
		p.Blackhole(sandbox.Both)
	}
	ps.all = append(ps.all, p)
	return p, nil
}

// forAddr returns the proxy to the cluster node at addr, made on first use.
func (ps *paths) forAddr(addr string) (*sandbox.Proxy, error) {
	ps.mu.Lock()
	p := ps.byAddr[addr]
	ps.mu.Unlock()
	if p != nil {
		return p, nil
	}
	p, err := ps.add(func() string { return addr }) // cluster nodes keep their address
	if err != nil {
		return nil, err
	}
	ps.mu.Lock()
	defer ps.mu.Unlock()
	if q := ps.byAddr[addr]; q != nil { // lost a race: keep the first
		// Remove p itself: other addresses' proxies may have been added
		// since (removing the last one leaked a proxy another dial made).
		ps.all = slices.DeleteFunc(ps.all, func(x *sandbox.Proxy) bool { return x == p })
		_ = p.Close()
		return q, nil
	}
	ps.byAddr[addr] = p
	return p, nil
}

func (ps *paths) each(f func(p *sandbox.Proxy)) {
	ps.mu.Lock()
	all := append([]*sandbox.Proxy(nil), ps.all...)
	ps.mu.Unlock()
	for _, p := range all {
		f(p)
	}
}

func (ps *paths) partition(on bool) {
	ps.mu.Lock()
	ps.partitioned = on
	ps.mu.Unlock()
	ps.each(func(p *sandbox.Proxy) {
		if on {
			p.Blackhole(sandbox.Both)
		} else {
			p.Heal()
		}
	})
}

func (ps *paths) close() {
	ps.mu.Lock()
	ps.closed = true
	ps.mu.Unlock()
	ps.each(func(p *sandbox.Proxy) { _ = p.Close() })
}

// isScriptCall matches a chunk that runs one of the driver's scripts
// (EVALSHA, or EVAL after NOSCRIPT): the driver's lock operations, not
// its pub/sub traffic.
func isScriptCall(chunk []byte) bool {
	c := bytes.ToLower(chunk)
	return bytes.Contains(c, []byte("\r\nevalsha\r\n")) || bytes.Contains(c, []byte("\r\neval\r\n"))
}
