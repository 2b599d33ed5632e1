// Package redisbench compares distlock's Redis backend with
// github.com/go-redsync/redsync/v4 and github.com/bsm/redislock on one
// sandbox Redis server, in one run.
package redisbench

import (
	"context"
	"errors"
	"time"

	"github.com/bsm/redislock"
	"github.com/go-redsync/redsync/v4"
	"github.com/go-redsync/redsync/v4/redis/goredis/v9"
	"github.com/redis/go-redis/v9"

	"github.com/distlock/distlock"
	"github.com/distlock/distlock/bench/internal/lockbench"
	"github.com/distlock/distlock/bench/internal/measure"
	"github.com/distlock/distlock/bench/internal/peers"
	dlredis "github.com/distlock/distlock/redislock"
)

// leaseTTL is the TTL every library uses: long enough that nothing expires
// during a measurement.
const leaseTTL = 10 * time.Second

// contender is one lock library as a process would use it: its own client.
type contender interface {
	// Acquire (measure.Contender) blocks until key is held or ctx ends.
	measure.Contender
	// Try makes one attempt.
	Try(ctx context.Context, key string) (release func(context.Context) error, err error)
}

// library makes contenders of one library.
type library struct {
	name string
	make func(addr string) contender
}

// waiting returns lib for the measurement core: contenders that wait.
func (lib library) waiting() measure.Library {
	return measure.Library{Name: lib.name, Make: func() (measure.Contender, error) { return lib.make(addr), nil }}
}

// trying returns lib with contenders whose Acquire makes one attempt.
func (lib library) trying() measure.Library {
	return measure.Library{Name: lib.name, Make: func() (measure.Contender, error) { return tries{lib.make(addr)}, nil }}
}

// tries is a contender whose Acquire is its Try.
type tries struct{ contender }

func (x tries) Acquire(ctx context.Context, key string) (func(context.Context) error, error) {
	return x.Try(ctx, key)
}

var libraries = []library{
	{name: "distlock", make: newDistlock},
	{name: "distlock-notify", make: newDistlockNotify},
	{name: "redsync", make: newRedsync},
	{name: "bsm/redislock", make: newBSM},
}

// fencedLib is the fenced floor (internal/peers): one script SET NX PX +
// INCR of a per-key counter, an owner-checked DEL. Not in libraries:
// TestCompare's renewal has no case for it.
var fencedLib = library{name: "fenced-floor", make: func(addr string) contender {
	return &peers.RedisFenced{C: newClient(addr), TTL: leaseTTL}
}}

func newClient(addr string) *redis.Client {
	return redis.NewClient(&redis.Options{Addr: addr, PoolSize: 64})
}

// distlock: a Locker over the redislock driver (default: wait=queue, fair hand-off).
func newDistlock(addr string) contender { return newDistlockOpts(addr, nil) }

// newDistlockNotify uses wait=notify instead of the default queue: a
// release wakes every waiter and the first to retry wins.
func newDistlockNotify(addr string) contender {
	return newDistlockOpts(addr, &dlredis.Options{Wait: dlredis.WaitNotify})
}

func newDistlockOpts(addr string, opts *dlredis.Options) contender {
	c := newClient(addr)
	d, err := dlredis.New(c, opts)
	if err != nil {
		panic(err)
	}
	l := distlock.New(d, distlock.WithDefaultTTL(leaseTTL))
	return &lockbench.LockerContender{L: l, CloseClient: func() { _ = c.Close() }}
}

// redsync: its defaults (32 tries, 50–250 ms random delay between them).
type redsyncC struct {
	c  *redis.Client
	rs *redsync.Redsync
}

func newRedsync(addr string) contender {
	c := newClient(addr)
	return &redsyncC{c: c, rs: redsync.New(goredis.NewPool(c))}
}

func (x *redsyncC) lock(ctx context.Context, key string, opts ...redsync.Option) (func(context.Context) error, error) {
	m := x.rs.NewMutex(key, append([]redsync.Option{redsync.WithExpiry(leaseTTL)}, opts...)...)
	if err := m.LockContext(ctx); err != nil {
		return nil, err
	}
	return func(ctx context.Context) error {
		ok, err := m.UnlockContext(ctx)
		if err == nil && !ok {
			err = errors.New("redsync: unlock failed")
		}
		return err
	}, nil
}

func (x *redsyncC) Acquire(ctx context.Context, key string) (func(context.Context) error, error) {
	for {
		rel, err := x.lock(ctx, key)
		if err == nil || ctx.Err() != nil {
			return rel, err
		}
		// redsync gives up after its 32 tries: try again, as a caller would.
	}
}

func (x *redsyncC) Try(ctx context.Context, key string) (func(context.Context) error, error) {
	return x.lock(ctx, key, redsync.WithTries(1))
}

func (x *redsyncC) Close() { _ = x.c.Close() }

// bsm/redislock: linear backoff of 100 ms while waiting (its README's
// example), no retry for a single attempt.
type bsmC struct {
	c  *redis.Client
	lc *redislock.Client
}

func newBSM(addr string) contender { return newBSMOn(newClient(addr)) }

func newBSMOn(c *redis.Client) *bsmC { return &bsmC{c: c, lc: redislock.New(c)} }

func (x *bsmC) obtain(ctx context.Context, key string, opt *redislock.Options) (func(context.Context) error, error) {
	l, err := x.lc.Obtain(ctx, key, leaseTTL, opt)
	if err != nil {
		return nil, err
	}
	return l.Release, nil
}

func (x *bsmC) Acquire(ctx context.Context, key string) (func(context.Context) error, error) {
	return x.obtain(ctx, key, &redislock.Options{RetryStrategy: redislock.LinearBackoff(100 * time.Millisecond)})
}

func (x *bsmC) Try(ctx context.Context, key string) (func(context.Context) error, error) {
	return x.obtain(ctx, key, nil)
}

func (x *bsmC) Close() { _ = x.c.Close() }
