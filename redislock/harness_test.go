package redislock

import (
	"context"
	"errors"
	"fmt"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/distlock/distlock/backend"
	"github.com/distlock/distlock/conformance"
	"github.com/distlock/distlock/sandbox"
)

// harness is a conformance.Harness over sandbox Redis servers in one of the
// driver's modes: "single", "redlock" (every node an independent primary)
// or "cluster".
type harness struct {
	g    *sandbox.Group
	mode string
	opts *Options
	ttl  time.Duration

	mu      sync.Mutex
	clients map[backend.Driver][]redis.UniversalClient
	paused  bool // the docker provider refuses to resume a running node
}

func newHarness(g *sandbox.Group, mode string) *harness {
	return &harness{g: g, mode: mode, ttl: time.Second, clients: map[backend.Driver][]redis.UniversalClient{}}
}

// maker returns a conformance.Maker sharing one group for every case.
func (h *harness) maker() conformance.Maker {
	return func(context.Context, *testing.T) (conformance.Harness, error) {
		nh := newHarness(h.g, h.mode)
		nh.opts = h.opts
		return nh, nil
	}
}

// nodeClient returns a client of node n that dials the node's current
// address each time (a container's port changes after a restart).
func nodeClient(n sandbox.Node) *redis.Client {
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

func clusterClient(g *sandbox.Group) *redis.ClusterClient {
	return redis.NewClusterClient(&redis.ClusterOptions{
		Addrs:       g.Addrs(),
		DialTimeout: 2 * time.Second, ReadTimeout: 2 * time.Second, WriteTimeout: 2 * time.Second,
		MaxRedirects: 3,
	})
}

// newClients returns the clients one driver (one "process") uses.
func (h *harness) newClients() []redis.UniversalClient {
	switch h.mode {
	case "cluster":
		return []redis.UniversalClient{clusterClient(h.g)}
	case "redlock":
		var cs []redis.UniversalClient
		for _, n := range h.g.Nodes() {
			cs = append(cs, nodeClient(n))
		}
		return cs
	default:
		return []redis.UniversalClient{nodeClient(h.g.Node(0))}
	}
}

func (h *harness) NewDriver(context.Context) (backend.Driver, error) {
	cs := h.newClients()
	var d backend.Driver
	var err error
	if h.mode == "redlock" {
		d, err = NewRedlock(cs, h.opts)
	} else {
		d, err = New(cs[0], h.opts)
	}
	if err != nil {
		closeAll(cs)
		return nil, err
	}
	h.mu.Lock()
	h.clients[d] = cs
	h.mu.Unlock()
	return d, nil
}

func (h *harness) TTL() time.Duration { return h.ttl }

// Kill closes the driver's clients and pub/sub connections without
// releasing anything, as a dying process would.
func (h *harness) Kill(_ context.Context, d backend.Driver) error {
	h.mu.Lock()
	cs := h.clients[d]
	h.mu.Unlock()
	if cs == nil {
		return fmt.Errorf("unknown driver %T", d)
	}
	switch d := d.(type) {
	case *Driver:
		_ = d.notify.close()
	case *Redlock:
		for _, n := range d.nodes {
			_ = n.notify.close()
		}
	}
	closeAll(cs)
	return nil
}

// Delete removes key's lock from every node, through separate clients.
func (h *harness) Delete(ctx context.Context, key string) error {
	lockKey := keysFor(DefaultPrefix, key).lock
	cs := h.newClients()
	defer closeAll(cs)
	var errs []error
	for _, c := range cs {
		errs = append(errs, c.Del(ctx, lockKey).Err())
	}
	return errors.Join(errs...)
}

// StopServer pauses every node: connections stay open, nothing answers.
func (h *harness) StopServer(ctx context.Context) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.paused = true
	var errs []error
	for _, n := range h.g.Nodes() {
		errs = append(errs, n.Pause(ctx))
	}
	return errors.Join(errs...)
}

func (h *harness) StartServer(ctx context.Context) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	if !h.paused {
		return nil
	}
	h.paused = false
	var errs []error
	for _, n := range h.g.Nodes() {
		errs = append(errs, n.Resume(ctx))
	}
	return errors.Join(errs...)
}

// Close closes the clients of every driver made for the case (the drivers
// themselves were closed by their Lockers).
func (h *harness) Close() error {
	h.mu.Lock()
	defer h.mu.Unlock()
	for d, cs := range h.clients {
		_ = d.Close()
		closeAll(cs)
	}
	clear(h.clients)
	return nil
}

func distlockUnavailable(err error) bool { return errors.Is(err, backend.ErrUnavailable) }

func contextWithTimeout(d time.Duration) (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.Background(), d)
}
