package etcdlock_test

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
	"google.golang.org/grpc"

	"github.com/distlock/distlock/backend"
	"github.com/distlock/distlock/etcdlock"
	"github.com/distlock/distlock/sandbox"
)

// testTTL is the lease TTL of the tests: etcd's minimum with default timings.
const testTTL = 2 * time.Second

// cluster is a sandbox etcd group shared by a test's cases.
type cluster struct {
	g *sandbox.Group
}

func startCluster(t *testing.T, nodes int) *cluster {
	t.Helper()
	return &cluster{g: sandbox.StartT(t, sandbox.Spec{Kind: sandbox.Etcd, Nodes: nodes})}
}

// client returns a new etcd client of every member (at their current
// addresses); the caller closes it.
func (c *cluster) client(ctx context.Context) (*clientv3.Client, error) {
	return clientv3.New(clientv3.Config{
		Endpoints:   c.g.Addrs(),
		DialTimeout: 10 * time.Second,
		Context:     ctx,
		Logger:      zap.NewNop(),
	})
}

// harness implements conformance.Harness, ServerControl, Partitioner,
// ReplyDropper and UserClients over a cluster. Each driver gets its own client, which
// reaches every member through proxies of its own (sandbox.Proxy), so a
// partition or a lost reply of one driver leaves the others connected.
// Kill closes the client without revoking anything; StopServer pauses
// every member (so addresses stay the same).
type harness struct {
	c      *cluster
	prefix string

	mu      sync.Mutex
	clients []*clientv3.Client
	proxies map[backend.Driver][]*sandbox.Proxy
	paused  bool
}

// driverVia returns a driver with opts on a client of c of its own,
// dialled with dial; the client is closed when t ends, the driver is the
// caller's.
func (c *cluster) driverVia(t *testing.T, opts *etcdlock.Options, dial ...grpc.DialOption) *etcdlock.Driver {
	t.Helper()
	cli, err := clientv3.New(clientv3.Config{
		Endpoints: c.g.Addrs(), DialTimeout: 10 * time.Second, Logger: zap.NewNop(), DialOptions: dial,
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cli.Close() })
	d, err := etcdlock.New(cli, opts)
	if err != nil {
		t.Fatal(err)
	}
	return d
}

func newHarness(c *cluster, prefix string) *harness {
	return &harness{c: c, prefix: prefix, proxies: map[backend.Driver][]*sandbox.Proxy{}}
}

func (h *harness) NewDriver(ctx context.Context) (backend.Driver, error) {
	return h.newDriver(func(endpoints []string) (*clientv3.Client, error) {
		return clientv3.New(clientv3.Config{
			Endpoints: endpoints, DialTimeout: 10 * time.Second, Context: context.Background(), Logger: zap.NewNop(),
		})
	})
}

// NewUserDriver makes a driver as a service does (conformance.UserClients):
// clientv3.New with the endpoints and nothing else (no DialTimeout, so New
// returns without waiting for a connection; the client's default logger,
// keepalive and retry settings), and New over it. The endpoints are
// proxies of the driver's own, so Partition and Kill work on it; Close
// closes the client.
func (h *harness) NewUserDriver(ctx context.Context) (backend.Driver, error) {
	return h.newDriver(func(endpoints []string) (*clientv3.Client, error) {
		return clientv3.New(clientv3.Config{Endpoints: endpoints})
	})
}

// newDriver makes a driver over the client newClient makes to proxies of
// its own, one per member.
func (h *harness) newDriver(newClient func(endpoints []string) (*clientv3.Client, error)) (backend.Driver, error) {
	var ps []*sandbox.Proxy
	var endpoints []string
	closeProxies := func() {
		for _, p := range ps {
			_ = p.Close()
		}
	}
	for _, n := range h.c.g.Nodes() {
		p, err := sandbox.StartProxy(n.Addr) // asked per connection: a container's port changes after a restart
		if err != nil {
			closeProxies()
			return nil, err
		}
		ps = append(ps, p)
		endpoints = append(endpoints, p.Addr())
	}
	cli, err := newClient(endpoints)
	if err != nil {
		closeProxies()
		return nil, err
	}
	h.mu.Lock()
	h.clients = append(h.clients, cli)
	h.mu.Unlock()
	d, err := etcdlock.New(cli, &etcdlock.Options{Prefix: h.prefix, TTL: testTTL})
	if err != nil {
		closeProxies()
		return nil, err
	}
	h.mu.Lock()
	h.proxies[d] = ps
	h.mu.Unlock()
	return d, nil
}

func (h *harness) proxiesOf(d backend.Driver) ([]*sandbox.Proxy, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	ps, ok := h.proxies[d]
	if !ok {
		return nil, fmt.Errorf("driver %T was not made by this harness", d)
	}
	return ps, nil
}

// Partition black-holes d's path to every member.
func (h *harness) Partition(_ context.Context, d backend.Driver) error {
	ps, err := h.proxiesOf(d)
	for _, p := range ps {
		p.Blackhole(sandbox.Both)
	}
	return err
}

func (h *harness) Heal(_ context.Context, d backend.Driver) error {
	ps, err := h.proxiesOf(d)
	for _, p := range ps {
		p.Heal()
	}
	return err
}

// DropNextReply loses the response to the next RPC d starts (an HTTP/2
// stream it opens: a Txn, a lease grant or keep-alive, a range), on
// whichever member it goes to: the first proxy to see one takes the
// loss. The connection is closed once the server answers that stream, so
// the RPC has run; frames on other streams and flow control in between are
// lost too. A background session keep-alive (every TTL/3) is an RPC too
// and may take the loss.
func (h *harness) DropNextReply(_ context.Context, d backend.Driver) error {
	ps, err := h.proxiesOf(d)
	if err != nil {
		return err
	}
	var taken sync.Mutex
	done := false
	claim := func(chunk []byte) bool {
		if _, ok := newStream(chunk); !ok {
			return false
		}
		taken.Lock()
		defer taken.Unlock()
		if done {
			return false
		}
		done = true
		return true
	}
	for _, p := range ps {
		p.DropReply(claim, answersStream)
	}
	return nil
}

func (h *harness) Dropped(d backend.Driver) int {
	ps, _ := h.proxiesOf(d)
	n := 0
	for _, p := range ps {
		n += p.Dropped()
	}
	return n
}

// h2Frames calls f with the type and stream of each HTTP/2 frame in chunk
// (after the client preface, if chunk starts with it) until f returns true.
func h2Frames(chunk []byte, f func(typ byte, stream uint32) bool) bool {
	chunk = bytes.TrimPrefix(chunk, []byte("PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"))
	for len(chunk) >= 9 {
		n := int(chunk[0])<<16 | int(chunk[1])<<8 | int(chunk[2])
		if f(chunk[3], binary.BigEndian.Uint32(chunk[5:9])&^(1<<31)) {
			return true
		}
		if 9+n > len(chunk) {
			break
		}
		chunk = chunk[9+n:]
	}
	return false
}

const (
	h2Data    = 0x0
	h2Headers = 0x1
)

// newStream returns the stream a HEADERS frame in chunk opens.
func newStream(chunk []byte) (uint32, bool) {
	var id uint32
	ok := h2Frames(chunk, func(typ byte, stream uint32) bool {
		id = stream
		return typ == h2Headers && stream != 0
	})
	return id, ok
}

// answersStream reports whether reply carries the response (headers or
// data) of the stream request opened.
func answersStream(request, reply []byte) bool {
	id, ok := newStream(request)
	if !ok {
		return true
	}
	return h2Frames(reply, func(typ byte, stream uint32) bool {
		return (typ == h2Data || typ == h2Headers) && stream == id
	})
}

func (h *harness) TTL() time.Duration { return testTTL }

func (h *harness) Kill(_ context.Context, d backend.Driver) error {
	ed, ok := d.(*etcdlock.Driver)
	if !ok {
		return fmt.Errorf("not an etcdlock driver: %T", d)
	}
	return ed.Client().Close()
}

// Delete deletes every key of key's lock (holder and waiters) from another
// client.
func (h *harness) Delete(ctx context.Context, key string) error {
	cli, err := h.c.client(ctx)
	if err != nil {
		return err
	}
	defer cli.Close()
	prefix, _ := etcdlock.NormalizePrefix(h.prefix)
	_, err = cli.Delete(ctx, etcdlock.LockRange(prefix, key), clientv3.WithPrefix())
	return err
}

func (h *harness) StopServer(ctx context.Context) error {
	h.mu.Lock()
	h.paused = true
	h.mu.Unlock()
	var errs []error
	for _, n := range h.c.g.Nodes() {
		errs = append(errs, n.Pause(ctx))
	}
	return errors.Join(errs...)
}

// StartServer resumes the members paused by StopServer; it does nothing
// if they are running (the suite calls it again in its cleanup).
func (h *harness) StartServer(ctx context.Context) error {
	h.mu.Lock()
	paused := h.paused
	h.paused = false
	h.mu.Unlock()
	if !paused {
		return h.c.g.Wait(ctx)
	}
	var errs []error
	for _, n := range h.c.g.Nodes() {
		errs = append(errs, n.Resume(ctx))
	}
	if err := errors.Join(errs...); err != nil {
		return err
	}
	return h.c.g.Wait(ctx)
}

func (h *harness) Close() error {
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, cli := range h.clients {
		_ = cli.Close() // a killed driver's client is closed already
	}
	h.clients = nil
	for _, ps := range h.proxies {
		for _, p := range ps {
			_ = p.Close()
		}
	}
	clear(h.proxies)
	return nil
}

// leftovers returns the keys left under prefix.
func (c *cluster) leftovers(t *testing.T, prefix string) []string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	cli, err := c.client(ctx)
	if err != nil {
		t.Fatalf("client: %v", err)
	}
	defer cli.Close()
	resp, err := cli.Get(ctx, prefix, clientv3.WithPrefix(), clientv3.WithKeysOnly())
	if err != nil {
		t.Fatalf("get %s: %v", prefix, err)
	}
	var keys []string
	for _, kv := range resp.Kvs {
		if strings.HasSuffix(string(kv.Key), "%rwfence") {
			continue // a read-write lock's last write token stays, by design (rwlock.go)
		}
		if strings.HasPrefix(string(kv.Key), prefix+"forced/") {
			continue // the record of a forced release stays for backend.ForcedKeep, by design (force.go)
		}
		keys = append(keys, string(kv.Key))
	}
	return keys
}
