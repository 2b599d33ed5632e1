package sandbox

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net/url"
	"strings"
	"sync"
	"time"
)

// Node is one server of a [Group]. Its methods are safe for concurrent use;
// they are serialised per node. Each blocking method's ctx bounds the call,
// not the server's life.
type Node interface {
	// Name identifies the node within its group, e.g. "etcd-1".
	Name() string
	// Addr is the server's current host:port, reachable from this host.
	// A container's port may change after Start: read Addr again then.
	Addr() string
	// Kill ends the server at once (SIGKILL), with no clean shutdown.
	Kill(ctx context.Context) error
	// Stop shuts the server down cleanly (SIGTERM, then SIGKILL after a
	// grace period). A paused server is resumed first.
	Stop(ctx context.Context) error
	// Start starts a killed or stopped server again on its data and waits
	// until it answers its protocol. A member of a ZooKeeper ensemble or
	// etcd cluster answers before it has quorum: use [Group.Wait] to wait
	// for the group to serve. Starting a running node does nothing.
	Start(ctx context.Context) error
	// Pause freezes the server (SIGSTOP to its process group, or docker
	// pause): connections stay open but nothing is answered.
	Pause(ctx context.Context) error
	// Resume undoes Pause.
	Resume(ctx context.Context) error
}

// member is what a provider gives the Group for each node.
type member interface {
	Node
	// peer is the address other nodes of the group use to reach this one
	// (for Redis Cluster MEET): host, client port and cluster bus port.
	peer(ctx context.Context) (host string, port, busPort int, err error)
	// close ends the server for good; the group removes what remains.
	close(ctx context.Context) error
}

// provider starts groups of servers of one flavour (docker or local).
type provider interface {
	name() string
	// start starts every node of spec and waits until each answers its
	// protocol. On error it has already released whatever it started.
	start(ctx context.Context, spec Spec) ([]member, func(context.Context) error, error)
}

// Group is a set of servers started together, owned by the caller until
// Close. Its methods are safe for concurrent use.
type Group struct {
	spec     Spec
	provider string
	members  []member
	release  func(context.Context) error

	mu     sync.Mutex
	closed bool
}

// Start starts the servers described by spec with the provider chosen by
// spec.Provider or DISTLOCK_SANDBOX, and returns once every server serves
// clients (a Redis Cluster reports cluster_state:ok; replicas are linked to
// their primary). ctx bounds the start only. The caller must Close the group.
func Start(ctx context.Context, spec Spec) (*Group, error) {
	spec, err := spec.normalize()
	if err != nil {
		return nil, err
	}
	p, err := chooseProvider(ctx, spec)
	if err != nil {
		return nil, err
	}
	if spec.TLS {
		var hosts []string
		if dp, ok := p.(*dockerProvider); ok {
			hosts = append(hosts, dp.host)
		}
		if spec.tls, err = newTLSMaterial(hosts...); err != nil {
			if dp, ok := p.(*dockerProvider); ok {
				dp.close()
			}
			return nil, err
		}
	}
	spec.Logf("sandbox: starting %d %s node(s) (%s) with the %s provider", spec.Nodes, spec.Kind, topologyName(spec.Topology), p.name())
	members, release, err := p.start(ctx, spec)
	if err != nil {
		return nil, errors.Join(err, spec.tls.remove())
	}
	if spec.tls != nil {
		inner := release
		release = func(ctx context.Context) error { return errors.Join(inner(ctx), spec.tls.remove()) }
	}
	g := &Group{spec: spec, provider: p.name(), members: members, release: release}
	if err := g.setup(ctx); err != nil {
		return nil, errors.Join(err, g.Close())
	}
	return g, nil
}

func topologyName(t Topology) string {
	if t == Independent {
		return "independent"
	}
	return string(t)
}

// setup turns freshly started servers into the requested topology and
// waits until it serves.
func (g *Group) setup(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, g.spec.StartTimeout)
	defer cancel()
	switch g.spec.Topology {
	case Cluster:
		if err := createRedisCluster(ctx, g.members, g.spec.primaries, g.spec.tls.clientConfig()); err != nil {
			return err
		}
	case Replica:
		if err := waitRedisReplicas(ctx, g.Addrs()[1:], g.spec.tls.clientConfig()); err != nil {
			return err
		}
	}
	return g.Wait(ctx)
}

// Kind is the kind of server in the group.
func (g *Group) Kind() Kind { return g.spec.Kind }

// Topology is the group's topology.
func (g *Group) Topology() Topology { return g.spec.Topology }

// Provider names the provider that started the group: "docker" or "local".
func (g *Group) Provider() string { return g.provider }

// Primaries is the number of primaries of a Redis [Cluster] (nodes
// 0..Primaries-1 at the start; a failover changes who is primary), 0 for
// other groups.
func (g *Group) Primaries() int { return g.spec.primaries }

// TLSFiles returns the PEM files of a group started with [Spec.TLS], and
// false for other groups.
func (g *Group) TLSFiles() (TLSFiles, bool) {
	if g.spec.tls == nil {
		return TLSFiles{}, false
	}
	return g.spec.tls.files, true
}

// ClientTLS returns a new client TLS configuration for a group started with
// [Spec.TLS]: it trusts the group's CA and presents the client
// certificate, and verifies the servers' host (127.0.0.1 for local
// servers). It returns nil for other groups.
func (g *Group) ClientTLS() *tls.Config { return g.spec.tls.clientConfig() }

// Nodes returns the group's nodes in order (node 0 is the Redis primary of a
// [Replica] group).
func (g *Group) Nodes() []Node {
	nodes := make([]Node, len(g.members))
	for i, m := range g.members {
		nodes[i] = m
	}
	return nodes
}

// Node returns node i; it panics if i is out of range, like a slice index.
func (g *Group) Node(i int) Node { return g.members[i] }

// Addrs returns every node's current host:port, in node order.
func (g *Group) Addrs() []string {
	addrs := make([]string, len(g.members))
	for i, m := range g.members {
		addrs[i] = m.Addr()
	}
	return addrs
}

// URL returns the distlock backend URL of the group's current addresses:
// redis://h:p (node 0 for a single server or a [Replica] group, every node
// comma-separated otherwise; rediss://...?tls_ca=FILE for a [Spec.TLS]
// group), mysql://root:pw@h:p/distlock (node 0),
// postgres://postgres:pw@h:p/distlock?sslmode=disable (node 0;
// sslmode=verify-full&sslrootcert=FILE for a [Spec.TLS] group), zk://h:p,...
// (zks://h:p,...?tls_ca=FILE for a [Spec.TLS] group) or etcd://h:p,....
func (g *Group) URL() string {
	addrs := g.Addrs()
	switch g.spec.Kind {
	case Redis:
		if g.spec.Topology == Replica {
			addrs = addrs[:1]
		}
		if g.spec.tls != nil {
			return "rediss://" + strings.Join(addrs, ",") + "?" + url.Values{"tls_ca": {g.spec.tls.files.CA}}.Encode()
		}
		return RedisURL(addrs...)
	case MariaDB:
		return MySQLURL(addrs[0])
	case Postgres:
		if g.spec.tls != nil {
			return PostgresTLSURL(addrs[0], g.spec.tls.files.CA)
		}
		return PostgresURL(addrs[0])
	case ZooKeeper:
		if g.spec.tls != nil {
			return "zks://" + strings.Join(addrs, ",") + "?" + url.Values{"tls_ca": {g.spec.tls.files.CA}}.Encode()
		}
		return ZooKeeperURL(addrs...)
	default:
		return EtcdURL(addrs...)
	}
}

// MySQLDSN returns the go-sql-driver/mysql DSN of node 0 of a MariaDB group;
// see the package function [MySQLDSN] for other nodes.
func (g *Group) MySQLDSN() string { return MySQLDSN(g.members[0].Addr()) }

// Wait waits until every node of the group serves clients: Redis answers
// PING (and a Redis Cluster reports cluster_state:ok on every node),
// MariaDB and PostgreSQL answer a query, a ZooKeeper server reports its mode and an etcd
// member reports itself healthy (which needs a leader). All nodes must be
// running. ctx bounds the wait.
func (g *Group) Wait(ctx context.Context) error {
	if g.isClosed() {
		return errors.New("sandbox: group is closed")
	}
	for _, m := range g.members {
		if err := waitUntil(ctx, func(ctx context.Context) error {
			return probeServing(ctx, g.spec.Kind, m.Addr(), g.spec.tls.clientConfig())
		}); err != nil {
			return fmt.Errorf("sandbox: %s does not serve: %w", m.Name(), err)
		}
	}
	if g.spec.Topology == Cluster {
		return waitRedisCluster(ctx, g.Addrs(), g.spec.tls.clientConfig())
	}
	return nil
}

// Promote makes node i of a Redis [Replica] group a primary (REPLICAOF NO
// ONE), as a failover would. The old primary keeps running as a primary
// too: kill or stop it to simulate a failover.
func (g *Group) Promote(ctx context.Context, i int) error {
	if g.spec.Kind != Redis || g.spec.Topology != Replica {
		return fmt.Errorf("sandbox: Promote needs a redis replica group, not %s/%s", g.spec.Kind, topologyName(g.spec.Topology))
	}
	if i < 0 || i >= len(g.members) {
		return fmt.Errorf("sandbox: no node %d in a group of %d", i, len(g.members))
	}
	return promoteRedis(ctx, g.members[i].Addr(), g.spec.tls.clientConfig())
}

// Close stops every server and removes its data, containers and network.
// It is safe to call more than once; later calls return nil.
func (g *Group) Close() error {
	g.mu.Lock()
	if g.closed {
		g.mu.Unlock()
		return nil
	}
	g.closed = true
	g.mu.Unlock()

	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	errs := make([]error, len(g.members)+1)
	var wg sync.WaitGroup
	for i, m := range g.members {
		wg.Go(func() { errs[i] = m.close(ctx) })
	}
	wg.Wait()
	if g.release != nil {
		errs[len(g.members)] = g.release(ctx)
	}
	return errors.Join(errs...)
}

func (g *Group) isClosed() bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.closed
}

// String describes the group for logs: kind, provider and addresses.
func (g *Group) String() string {
	return fmt.Sprintf("%s %s group (%s) at %s", g.provider, g.spec.Kind, topologyName(g.spec.Topology), strings.Join(g.Addrs(), ","))
}
