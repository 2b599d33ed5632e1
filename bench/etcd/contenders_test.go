package etcdbench

import (
	"context"
	"path"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"go.etcd.io/etcd/api/v3/etcdserverpb"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/client/v3/concurrency"
	"go.uber.org/zap"
	"google.golang.org/grpc"

	"github.com/distlock/distlock"
	"github.com/distlock/distlock/backend"
	"github.com/distlock/distlock/bench/internal/lockbench"
	"github.com/distlock/distlock/bench/internal/measure"
	"github.com/distlock/distlock/etcdlock"
)

// leaseTTL is the lease TTL of both libraries: long enough that nothing
// expires during a measurement.
const leaseTTL = 10 * time.Second

var libraries = []measure.Library{
	{Name: "distlock", Make: newDistlock},
	{Name: "etcd-mutex", Make: newMutex},
}

// baselines are measured alongside the libraries when uncontended: a bare
// Put round trip, and the etcdlock driver without the portable layer.
var baselines = []measure.Library{
	{Name: "Put", Make: newPut},
	{Name: "etcdlock", Make: newDriver},
}

func newClient(lib string) (*clientv3.Client, error) {
	count := func(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
		v, _ := requests.LoadOrStore(lib+" "+path.Base(method), new(atomic.Int64))
		v.(*atomic.Int64).Add(1)
		log := ops.Load()
		if log == nil {
			return invoker(ctx, method, req, reply, cc, opts...)
		}
		sent := time.Now()
		err := invoker(ctx, method, req, reply, cc, opts...)
		log.addOp(lib, requestKind(req), sent, time.Now())
		return err
	}
	return clientv3.New(clientv3.Config{
		Endpoints: []string{addr}, DialTimeout: 10 * time.Second, Logger: zap.NewNop(),
		DialOptions: []grpc.DialOption{grpc.WithChainUnaryInterceptor(count)},
	})
}

// ops, when set, logs the time of every unary request (TestFloor).
var ops atomic.Pointer[opLog]

// requestKind classifies a request for the op log: "put" for a write that
// puts a key (an enqueue), "del" for one that deletes, "read" for the rest.
func requestKind(req any) string {
	switch r := req.(type) {
	case *etcdserverpb.PutRequest:
		return "put"
	case *etcdserverpb.DeleteRangeRequest:
		return "del"
	case *etcdserverpb.TxnRequest:
		for _, o := range r.Success {
			switch {
			case o.GetRequestPut() != nil:
				return "put"
			case o.GetRequestDeleteRange() != nil:
				return "del"
			}
		}
	}
	return "read"
}

// requests counts the unary requests of each library's clients, by
// "library method" (watches are streams and not counted).
var requests sync.Map

// requestCounts returns lib's request counts and resets them.
func requestCounts(lib string) map[string]int64 {
	out := map[string]int64{}
	requests.Range(func(k, v any) bool {
		if l, method, _ := strings.Cut(k.(string), " "); l == lib {
			out[method] = v.(*atomic.Int64).Swap(0)
		}
		return true
	})
	return out
}

// newDistlock is a distlock Locker over an etcdlock Driver.
func newDistlock() (measure.Contender, error) {
	cli, err := newClient("distlock")
	if err != nil {
		return nil, err
	}
	d, err := etcdlock.New(cli, &etcdlock.Options{Prefix: "bench/distlock", TTL: leaseTTL})
	if err != nil {
		cli.Close()
		return nil, err
	}
	l := distlock.New(d, distlock.WithDefaultTTL(leaseTTL))
	return &lockbench.LockerContender{L: l, CloseClient: func() { _ = cli.Close() }}, nil
}

// driverContender is an etcdlock Driver used directly (Wait and Release),
// without a Locker: the portable layer's share of distlock's time.
type driverContender struct {
	cli *clientv3.Client
	d   *etcdlock.Driver
}

func newDriver() (measure.Contender, error) {
	cli, err := newClient("etcdlock")
	if err != nil {
		return nil, err
	}
	d, err := etcdlock.New(cli, &etcdlock.Options{Prefix: "bench/etcdlock", TTL: leaseTTL})
	if err != nil {
		cli.Close()
		return nil, err
	}
	return &driverContender{cli: cli, d: d}, nil
}

func (c *driverContender) Acquire(ctx context.Context, key string) (func(context.Context) error, error) {
	g, err := c.d.Wait(ctx, backend.Request{Key: key, Owner: "0123456789abcdef0123456789abcdef", TTL: leaseTTL})
	if err != nil {
		return nil, err
	}
	return g.Lock.Release, nil
}

func (c *driverContender) Close() {
	_ = c.d.Close()
	_ = c.cli.Close()
}

// putContender "acquires" with one Put and releases with nothing: the bare
// round trip the others are compared with.
type putContender struct{ cli *clientv3.Client }

func newPut() (measure.Contender, error) {
	cli, err := newClient("Put")
	if err != nil {
		return nil, err
	}
	return putContender{cli}, nil
}

func (c putContender) Acquire(ctx context.Context, key string) (func(context.Context) error, error) {
	if _, err := c.cli.Put(ctx, "bench/put/"+key, "x"); err != nil {
		return nil, err
	}
	return func(context.Context) error { return nil }, nil
}

func (c putContender) Close() { _ = c.cli.Close() }

// mutexContender is etcd's concurrency.Mutex on one session.
type mutexContender struct {
	cli *clientv3.Client
	s   *concurrency.Session
}

func newMutex() (measure.Contender, error) {
	cli, err := newClient("etcd-mutex")
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
