package etcdlock

import (
	"context"
	"strings"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/distlock/distlock"
	"github.com/distlock/distlock/sandbox"
)

// TestRWRequests counts, on the server (etcd's gRPC metrics), the unary
// requests of an uncontended read or write acquire + release through a
// Locker (docs/primitives.md quotes them): one transaction that puts our
// key and, the lock being free, grants it (a writer's puts the fence key,
// a reader's reads it), and the delete. Keepalives are a stream, not
// counted.
func TestRWRequests(t *testing.T) {
	g := sandbox.StartT(t, sandbox.Spec{Kind: sandbox.Etcd})
	addr := g.Addrs()[0]
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cli, err := clientv3.New(clientv3.Config{Endpoints: []string{addr}, DialTimeout: 10 * time.Second, Logger: zap.NewNop()})
	if err != nil {
		t.Fatal(err)
	}
	defer cli.Close()
	d, err := New(cli, &Options{Prefix: "rwcount", TTL: 10 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	l := distlock.New(d)
	defer l.Close()
	m, err := l.RWMutex("k")
	if err != nil {
		t.Fatal(err)
	}
	unary := func() float64 {
		var n float64
		for k, v := range metrics(t, addr) {
			if strings.HasPrefix(k, "grpc_server_handled_total{") && strings.Contains(k, `grpc_type="unary"`) {
				n += v
			}
		}
		return n
	}
	const pairs = 10
	for _, side := range []struct {
		name string
		want float64
		lock func() (*distlock.Lease, error)
	}{
		{"read", 2, func() (*distlock.Lease, error) { return m.RLock(ctx) }},
		{"write", 2, func() (*distlock.Lease, error) { return m.Lock(ctx) }},
	} {
		pair := func() {
			le, err := side.lock()
			if err != nil {
				t.Fatal(err)
			}
			if err := le.Release(ctx); err != nil {
				t.Fatal(err)
			}
		}
		pair() // warm-up: the lease exists
		before := unary()
		for range pairs {
			pair()
		}
		got := (unary() - before) / pairs
		t.Logf("%s: %.1f unary requests per acquire+release", side.name, got)
		if got != side.want {
			t.Errorf("%s: %.1f unary requests per acquire+release, want %v", side.name, got, side.want)
		}
	}
}
