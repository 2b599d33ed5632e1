// Package redistest is the test harness that the tests of redislock and
// redlock share: sandbox Redis servers behind per-driver proxies, as a
// conformance.Harness, and helpers over their nodes. Test code only: it
// imports the sandbox (standard library only, so a driver user's go.sum
// gets nothing from it) and conformance.
package redistest

import (
	"context"
	"errors"
	"fmt"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/distlock/distlock/backend"
	"github.com/distlock/distlock/conformance"
	"github.com/distlock/distlock/internal/redisproto"
	"github.com/distlock/distlock/sandbox"
)

// Harness is a conformance.Harness (with ServerControl, Partitioner,
// ReplyDropper, UserClients and NativeErrors) over sandbox Redis servers
// in one of the drivers' modes: "single", "redlock" (every node an
// independent primary) or "cluster". The driver package's tests give it
// the constructor of their driver (NewHarness).
//
// Every driver ("process") reaches every node through proxies of its own
// (sandbox.Proxy): a partition or a lost reply of one driver leaves the
// others connected.
type Harness struct {
	g    *sandbox.Group
	mode string
	ttl  time.Duration
	make func([]redis.UniversalClient) (backend.Driver, error)
	kill func(backend.Driver)

	mu      sync.Mutex
	clients map[backend.Driver][]redis.UniversalClient
	paths   map[backend.Driver]*paths
	paused  bool // the docker provider refuses to resume a running node
}

// NewHarness returns a Harness over g in mode whose drivers are
// make(clients): one client per node of g in mode "redlock", else one
// client (of the node, or of the Cluster). kill closes what a driver keeps
// open besides its clients (its pub/sub connections), as a dying process
// would lose them.
func NewHarness(g *sandbox.Group, mode string, make func([]redis.UniversalClient) (backend.Driver, error), kill func(backend.Driver)) *Harness {
	return &Harness{g: g, mode: mode, ttl: time.Second, make: make, kill: kill, clients: map[backend.Driver][]redis.UniversalClient{}, paths: map[backend.Driver]*paths{}}
}

// Maker returns a conformance.Maker sharing one group for every case.
func (h *Harness) Maker() conformance.Maker {
	return func(ctx context.Context, _ *testing.T) (conformance.Harness, error) {
		nh := NewHarness(h.g, h.mode, h.make, h.kill)
		nh.ttl = h.ttl
		// Load the scripts, so that a lost reply hits a script that runs,
		// not a NOSCRIPT probe.
		if err := LoadScripts(ctx, h.g); err != nil {
			return nil, err
		}
		return nh, nil
	}
}

func (h *Harness) NewDriver(context.Context) (backend.Driver, error) {
	return h.newDriver(h.newProxiedClients)
}

// NewUserDriver implements conformance.UserClients: a driver over clients
// made with go-redis's defaults (newUserClients), passed to
// the constructor NewHarness was given, through proxies as NewDriver's,
// and closed by the harness.
func (h *Harness) NewUserDriver(context.Context) (backend.Driver, error) {
	return h.newDriver(h.newUserClients)
}

func (h *Harness) newDriver(clients func(*paths) ([]redis.UniversalClient, error)) (backend.Driver, error) {
	ps := newPaths()
	cs, err := clients(ps)
	if err != nil {
		ps.close()
		return nil, err
	}
	d, err := h.make(cs)
	if err != nil {
		redisproto.CloseAll(cs)
		ps.close()
		return nil, err
	}
	h.mu.Lock()
	h.clients[d] = cs
	h.paths[d] = ps
	h.mu.Unlock()
	return d, nil
}

func (h *Harness) pathsOf(d backend.Driver) (*paths, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	ps := h.paths[d]
	if ps == nil {
		return nil, fmt.Errorf("driver %T was not made by this harness", d)
	}
	return ps, nil
}

// Partition black-holes every proxy of d, and those it makes later.
func (h *Harness) Partition(_ context.Context, d backend.Driver) error {
	return h.partition(d, true)
}

// Heal ends Partition.
func (h *Harness) Heal(_ context.Context, d backend.Driver) error {
	return h.partition(d, false)
}

func (h *Harness) partition(d backend.Driver, on bool) error {
	ps, err := h.pathsOf(d)
	if err != nil {
		return err
	}
	ps.partition(on)
	return nil
}

// DropNextReply loses the reply to d's next script call on each of its
// nodes (Redlock: the replies of every node to the same request).
func (h *Harness) DropNextReply(_ context.Context, d backend.Driver) error {
	ps, err := h.pathsOf(d)
	if err != nil {
		return err
	}
	if h.mode != "cluster" {
		ps.each(func(p *sandbox.Proxy) { p.DropReply(isScriptCall, nil) })
		return nil
	}
	// A request goes to one node, which is not known here: arm every
	// node's proxy (made now if the client has not dialled it yet), and
	// let the first script call through any of them take the loss.
	for _, a := range h.g.Addrs() {
		if _, err := ps.forAddr(a); err != nil {
			return err
		}
	}
	var taken atomic.Bool
	ps.each(func(p *sandbox.Proxy) {
		p.DropReply(func(c []byte) bool { return isScriptCall(c) && taken.CompareAndSwap(false, true) }, nil)
	})
	return nil
}

func (h *Harness) Dropped(d backend.Driver) int {
	ps, err := h.pathsOf(d)
	if err != nil {
		return 0
	}
	n := 0
	ps.each(func(p *sandbox.Proxy) { n += p.Dropped() })
	return n
}

func (h *Harness) TTL() time.Duration { return h.ttl }

// SetTTL sets the TTL the conformance cases use (1 s unless set); the
// harnesses its Maker makes keep it.
func (h *Harness) SetTTL(ttl time.Duration) { h.ttl = ttl }

// Kill closes the driver's clients and pub/sub connections without
// releasing anything, as a dying process would.
func (h *Harness) Kill(_ context.Context, d backend.Driver) error {
	h.mu.Lock()
	cs := h.clients[d]
	h.mu.Unlock()
	if cs == nil {
		return fmt.Errorf("unknown driver %T", d)
	}
	h.kill(d)
	redisproto.CloseAll(cs)
	return nil
}

// Delete removes key's lock from every node, through separate clients.
func (h *Harness) Delete(ctx context.Context, key string) error {
	lockKey := redisproto.KeysFor(redisproto.DefaultPrefix, key).Lock
	cs := h.newClients()
	defer redisproto.CloseAll(cs)
	if h.mode == "redlock" {
		// An attempt returns once a majority decided it; the other node's
		// grant may land after this Delete and leave the lock there. Wait
		// (at most 1 s: a node may be down or partitioned) until every
		// node has it, so that the deletion is the last word.
		deadline := time.Now().Add(time.Second)
		for _, c := range cs {
			for c.Exists(ctx, lockKey).Val() == 0 && time.Now().Before(deadline) {
				time.Sleep(5 * time.Millisecond)
			}
		}
	}
	var errs []error
	for _, c := range cs {
		errs = append(errs, c.Del(ctx, lockKey).Err())
	}
	return errors.Join(errs...)
}

// StopServer pauses every node: connections stay open, nothing answers.
func (h *Harness) StopServer(ctx context.Context) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.paused = true
	var errs []error
	for _, n := range h.g.Nodes() {
		errs = append(errs, n.Pause(ctx))
	}
	return errors.Join(errs...)
}

func (h *Harness) StartServer(ctx context.Context) error {
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
func (h *Harness) Close() error {
	h.mu.Lock()
	defer h.mu.Unlock()
	for d, cs := range h.clients {
		_ = d.Close()
		redisproto.CloseAll(cs)
	}
	for _, ps := range h.paths {
		ps.close()
	}
	clear(h.clients)
	clear(h.paths)
	return nil
}

func Unavailable(err error) bool { return errors.Is(err, backend.ErrUnavailable) }

// GrantedEverywhere waits (at most 5 s per node) until every node has the
// lock key lock: a Redlock attempt returns once its answers decide the
// grant, and the last node's grant may still be on its way. A test that
// changes the nodes' state after an uncontended grant waits for it first.
func GrantedEverywhere(t *testing.T, ctx context.Context, clients []redis.UniversalClient, lock string) {
	t.Helper()
	for n, c := range clients {
		for i := 0; c.Exists(ctx, lock).Val() == 0; i++ {
			if i == 500 {
				t.Fatalf("node %d never granted the uncontended lock", n)
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
}

var (
	_ conformance.ServerControl = (*Harness)(nil)
	_ conformance.Partitioner   = (*Harness)(nil)
	_ conformance.ReplyDropper  = (*Harness)(nil)
	_ conformance.UserClients   = (*Harness)(nil)
	_ conformance.NativeErrors  = (*Harness)(nil)
)

// NativeError implements conformance.NativeErrors: a go-redis error (a
// server reply or redis.ErrClosed) or the network error of its connection.
func (h *Harness) NativeError(err error) bool {
	var rerr redis.Error
	var nerr net.Error
	return errors.As(err, &rerr) || errors.As(err, &nerr) || errors.Is(err, redis.ErrClosed)
}

// With is a Harness whose drivers are made with the options Opts points
// to when each driver is made (nil: the driver's defaults): a driver
// package's tests set Opts before running the conformance suite.
type With[O any] struct {
	*Harness
	Opts *O
}

// NewWith is NewHarness for a driver made by make(clients, opts).
func NewWith[O any](g *sandbox.Group, mode string, make func([]redis.UniversalClient, *O) (backend.Driver, error), kill func(backend.Driver)) *With[O] {
	h := &With[O]{}
	h.Harness = NewHarness(g, mode, func(cs []redis.UniversalClient) (backend.Driver, error) { return make(cs, h.Opts) }, kill)
	return h
}
