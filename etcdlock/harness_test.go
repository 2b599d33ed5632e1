package etcdlock_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

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

// harness implements conformance.Harness and ServerControl over a cluster.
// Each driver gets its own client, which Kill closes without revoking
// anything; StopServer pauses every member (so addresses stay the same).
type harness struct {
	c      *cluster
	prefix string

	mu      sync.Mutex
	clients []*clientv3.Client
	paused  bool
}

func newHarness(c *cluster, prefix string) *harness { return &harness{c: c, prefix: prefix} }

func (h *harness) NewDriver(ctx context.Context) (backend.Driver, error) {
	cli, err := h.c.client(context.Background())
	if err != nil {
		return nil, err
	}
	h.mu.Lock()
	h.clients = append(h.clients, cli)
	h.mu.Unlock()
	return etcdlock.New(cli, &etcdlock.Options{Prefix: h.prefix, TTL: testTTL})
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
		keys = append(keys, string(kv.Key))
	}
	return keys
}
