package etcdbench

import (
	"context"
	"time"

	"github.com/distlock/distlock/bench/internal/lockbench"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/client/v3/concurrency"
	"go.uber.org/zap"

	"github.com/distlock/distlock"
	"github.com/distlock/distlock/etcdlock"
)

// leaseTTL is the lease TTL of both libraries: long enough that nothing
// expires during a measurement.
const leaseTTL = 10 * time.Second

var libraries = []lockbench.Library{
	{Name: "distlock", Make: newDistlock},
	{Name: "etcd-mutex", Make: newMutex},
}

func newClient() (*clientv3.Client, error) {
	return clientv3.New(clientv3.Config{Endpoints: []string{addr}, DialTimeout: 10 * time.Second, Logger: zap.NewNop()})
}

// distlockContender is a distlock Locker over an etcdlock Driver.
type distlockContender struct {
	cli *clientv3.Client
	l   *distlock.Locker
}

func newDistlock() (lockbench.Contender, error) {
	cli, err := newClient()
	if err != nil {
		return nil, err
	}
	d, err := etcdlock.New(cli, &etcdlock.Options{Prefix: "bench/distlock", TTL: leaseTTL})
	if err != nil {
		cli.Close()
		return nil, err
	}
	return &distlockContender{cli: cli, l: distlock.New(d, distlock.WithDefaultTTL(leaseTTL))}, nil
}

func (c *distlockContender) Acquire(ctx context.Context, key string) (func(context.Context) error, error) {
	le, err := c.l.Acquire(ctx, key)
	if err != nil {
		return nil, err
	}
	return le.Release, nil
}

func (c *distlockContender) Close() {
	_ = c.l.Close()
	_ = c.cli.Close()
}

// mutexContender is etcd's concurrency.Mutex on one session.
type mutexContender struct {
	cli *clientv3.Client
	s   *concurrency.Session
}

func newMutex() (lockbench.Contender, error) {
	cli, err := newClient()
	if err != nil {
		return nil, err
	}
	s, err := concurrency.NewSession(cli, concurrency.WithTTL(int(leaseTTL/time.Second)))
	if err != nil {
		cli.Close()
		return nil, err
	}
	return &mutexContender{cli: cli, s: s}, nil
}

func (c *mutexContender) Acquire(ctx context.Context, key string) (func(context.Context) error, error) {
	m := concurrency.NewMutex(c.s, "bench/mutex/"+key)
	if err := m.Lock(ctx); err != nil {
		return nil, err
	}
	return m.Unlock, nil
}

func (c *mutexContender) Close() {
	_ = c.s.Close()
	_ = c.cli.Close()
}
