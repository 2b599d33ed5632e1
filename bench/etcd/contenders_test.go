package etcdbench

import (
	"context"
	"fmt"
	"sync/atomic"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/client/v3/concurrency"
	"go.uber.org/zap"

	"github.com/distlock/distlock"
	"github.com/distlock/distlock/etcdlock"
)

// leaseTTL is the lease TTL of both libraries: long enough that nothing
// expires during a measurement.
const leaseTTL = 10 * time.Second

// contender is one lock library as a process would use it: its own client
// and its own lease (session).
type contender interface {
	// acquire blocks until key is held or ctx ends.
	acquire(ctx context.Context, key string) (release func(context.Context) error, err error)
	close()
}

// library makes contenders of one library.
type library struct {
	name string
	make func() (contender, error)
}

var libraries = []library{
	{"distlock", newDistlock},
	{"etcd-mutex", newMutex},
}

func newClient() (*clientv3.Client, error) {
	return clientv3.New(clientv3.Config{Endpoints: []string{addr}, DialTimeout: 10 * time.Second, Logger: zap.NewNop()})
}

var keySeq atomic.Int64

func uniqueKey(prefix string) string {
	return fmt.Sprintf("bench-%s-%d-%d", prefix, time.Now().UnixNano(), keySeq.Add(1))
}

// distlockContender is a distlock Locker over an etcdlock Driver.
type distlockContender struct {
	cli *clientv3.Client
	l   *distlock.Locker
}

func newDistlock() (contender, error) {
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

func (c *distlockContender) acquire(ctx context.Context, key string) (func(context.Context) error, error) {
	le, err := c.l.Acquire(ctx, key)
	if err != nil {
		return nil, err
	}
	return le.Release, nil
}

func (c *distlockContender) close() {
	_ = c.l.Close()
	_ = c.cli.Close()
}

// mutexContender is etcd's concurrency.Mutex on one session.
type mutexContender struct {
	cli *clientv3.Client
	s   *concurrency.Session
}

func newMutex() (contender, error) {
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

func (c *mutexContender) acquire(ctx context.Context, key string) (func(context.Context) error, error) {
	m := concurrency.NewMutex(c.s, "bench/mutex/"+key)
	if err := m.Lock(ctx); err != nil {
		return nil, err
	}
	return m.Unlock, nil
}

func (c *mutexContender) close() {
	_ = c.s.Close()
	_ = c.cli.Close()
}
