package redistest

import (
	"context"
	"fmt"
	"net"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/distlock/distlock/internal/redisproto"
	"github.com/distlock/distlock/sandbox"
)

// NodeClient returns a client of node n that dials the node's current
// address each time (a container's port changes after a restart).
func NodeClient(n sandbox.Node) *redis.Client {
	return redis.NewClient(&redis.Options{
		Addr: n.Addr(),
		Dialer: func(ctx context.Context, network, _ string) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, network, n.Addr())
		},
		DialTimeout: 2 * time.Second, ReadTimeout: 2 * time.Second, WriteTimeout: 2 * time.Second,
		MaxRetries: -1,
	})
}

// NodeClients returns a client of each node of g (NodeClient), in node
// order, closed when t ends: one Redlock's clients.
func NodeClients(t testing.TB, g *sandbox.Group) []redis.UniversalClient {
	var clients []redis.UniversalClient
	for _, n := range g.Nodes() {
		c := NodeClient(n)
		t.Cleanup(func() { c.Close() })
		clients = append(clients, c)
	}
	return clients
}

// LoadScripts loads the driver's scripts on every node.
func LoadScripts(ctx context.Context, g *sandbox.Group) error {
	for _, n := range g.Nodes() {
		c := NodeClient(n)
		for _, s := range []*redis.Script{redisproto.AcquireScript, redisproto.WaitScript, redisproto.ReleaseScript, redisproto.RefreshScript, redisproto.FenceScript} {
			if err := s.Load(ctx, c).Err(); err != nil {
				c.Close()
				return fmt.Errorf("load scripts on %s: %w", n.Name(), err)
			}
		}
		c.Close()
	}
	return nil
}

// proxiedNodeClient is NodeClient through p.
func proxiedNodeClient(p *sandbox.Proxy) *redis.Client {
	return redis.NewClient(&redis.Options{
		Addr:        p.Addr(),
		DialTimeout: 2 * time.Second, ReadTimeout: 2 * time.Second, WriteTimeout: 2 * time.Second,
		MaxRetries: -1,
	})
}

// proxiedClusterClient is clusterClient whose every connection goes
// through ps: go-redis passes the dialer the node address it wants (from
// the seeds or the cluster's slot map), which picks that node's proxy.
func proxiedClusterClient(g *sandbox.Group, ps *paths) *redis.ClusterClient {
	return redis.NewClusterClient(&redis.ClusterOptions{
		Addrs:       g.Addrs(),
		Dialer:      ps.dial,
		DialTimeout: 2 * time.Second, ReadTimeout: 2 * time.Second, WriteTimeout: 2 * time.Second,
		MaxRedirects: 3,
	})
}

func clusterClient(g *sandbox.Group) *redis.ClusterClient {
	return redis.NewClusterClient(&redis.ClusterOptions{
		Addrs:       g.Addrs(),
		DialTimeout: 2 * time.Second, ReadTimeout: 2 * time.Second, WriteTimeout: 2 * time.Second,
		MaxRedirects: 3,
	})
}

// newClients returns the clients one driver (one "process") uses.
func (h *Harness) newClients() []redis.UniversalClient {
	switch h.mode {
	case "cluster":
		return []redis.UniversalClient{clusterClient(h.g)}
	case "redlock":
		var cs []redis.UniversalClient
		for _, n := range h.g.Nodes() {
			cs = append(cs, NodeClient(n))
		}
		return cs
	default:
		return []redis.UniversalClient{NodeClient(h.g.Node(0))}
	}
}

// newProxiedClients returns the clients of one driver, each node reached
// through a proxy of ps. The clients are configured as newClients's:
// single and redlock with MaxRetries -1 (no go-redis retries: what the
// harness always did), cluster with go-redis's default retries.
func (h *Harness) newProxiedClients(ps *paths) ([]redis.UniversalClient, error) {
	if h.mode == "cluster" {
		return []redis.UniversalClient{proxiedClusterClient(h.g, ps)}, nil
	}
	return h.perNode(ps, func(p *sandbox.Proxy) redis.UniversalClient { return proxiedNodeClient(p) })
}

// newUserClients returns the clients of one driver built as a service
// builds them, with go-redis's defaults (ReadTimeout 5 s, MaxRetries 3,
// ContextTimeoutEnabled false: ctx deadlines do not bound a read), each
// node reached through a proxy of ps. Single and Redlock: NewClient with
// only Addr (the proxy's). Cluster: NewClusterClient with only Addrs, and
// a Dialer that routes each node address the client learns from the
// cluster through that node's proxy (it sets no timeout).
func (h *Harness) newUserClients(ps *paths) ([]redis.UniversalClient, error) {
	if h.mode == "cluster" {
		return []redis.UniversalClient{redis.NewClusterClient(&redis.ClusterOptions{Addrs: h.g.Addrs(), Dialer: ps.dial})}, nil
	}
	return h.perNode(ps, func(p *sandbox.Proxy) redis.UniversalClient {
		return redis.NewClient(&redis.Options{Addr: p.Addr()})
	})
}

// perNode returns client's clients of the nodes a single or Redlock
// driver uses (Redlock: every node; single: the first), each reached
// through a proxy of ps.
func (h *Harness) perNode(ps *paths, client func(*sandbox.Proxy) redis.UniversalClient) ([]redis.UniversalClient, error) {
	nodes := h.g.Nodes()
	if h.mode != "redlock" {
		nodes = nodes[:1]
	}
	var cs []redis.UniversalClient
	for _, n := range nodes {
		p, err := ps.add(n.Addr)
		if err != nil {
			redisproto.CloseAll(cs)
			return nil, err
		}
		cs = append(cs, client(p))
	}
	return cs, nil
}

// dial connects to the proxy of the node at addr (made now if there is
// none yet): a cluster client's Dialer, given the node address it wants.
func (ps *paths) dial(ctx context.Context, network, addr string) (net.Conn, error) {
	p, err := ps.forAddr(addr)
	if err != nil {
		return nil, err
	}
	var d net.Dialer
	return d.DialContext(ctx, network, p.Addr())
}
