// Package redisbench compares distlock's Redis backend with
// github.com/go-redsync/redsync/v4 and github.com/bsm/redislock on one
// sandbox Redis server, in one run.
package redisbench

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/bsm/redislock"
	"github.com/go-redsync/redsync/v4"
	"github.com/go-redsync/redsync/v4/redis/goredis/v9"
	"github.com/redis/go-redis/v9"

	"github.com/distlock/distlock"
	dlredis "github.com/distlock/distlock/redislock"
)

// leaseTTL is the TTL every library uses: long enough that nothing expires
// during a measurement.
const leaseTTL = 10 * time.Second

// contender is one lock library as a process would use it: its own client.
type contender interface {
	// acquire blocks until key is held or ctx ends.
	acquire(ctx context.Context, key string) (release func(context.Context) error, err error)
	// try makes one attempt.
	try(ctx context.Context, key string) (release func(context.Context) error, err error)
	close()
}

// library makes contenders of one library.
type library struct {
	name string
	make func(addr string) contender
}

var libraries = []library{
	{"distlock", newDistlock},
	{"distlock-notify", newDistlockNotify},
	{"redsync", newRedsync},
	{"bsm/redislock", newBSM},
}

func newClient(addr string) *redis.Client {
	return redis.NewClient(&redis.Options{Addr: addr, PoolSize: 64})
}

// distlock: a Locker over the redislock driver (default: wait=queue, fair hand-off).
type distlockC struct {
	c *redis.Client
	l *distlock.Locker
}

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
	return &distlockC{c: c, l: distlock.New(d, distlock.WithDefaultTTL(leaseTTL))}
}

func (x *distlockC) acquire(ctx context.Context, key string) (func(context.Context) error, error) {
	le, err := x.l.Acquire(ctx, key)
	if err != nil {
		return nil, err
	}
	return le.Release, nil
}

func (x *distlockC) try(ctx context.Context, key string) (func(context.Context) error, error) {
	le, err := x.l.TryAcquire(ctx, key)
	if err != nil {
		return nil, err
	}
	return le.Release, nil
}

func (x *distlockC) close() { _ = x.l.Close(); _ = x.c.Close() }

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

func (x *redsyncC) acquire(ctx context.Context, key string) (func(context.Context) error, error) {
	for {
		rel, err := x.lock(ctx, key)
		if err == nil || ctx.Err() != nil {
			return rel, err
		}
		// redsync gives up after its 32 tries: try again, as a caller would.
	}
}

func (x *redsyncC) try(ctx context.Context, key string) (func(context.Context) error, error) {
	return x.lock(ctx, key, redsync.WithTries(1))
}

func (x *redsyncC) close() { _ = x.c.Close() }

// bsm/redislock: linear backoff of 100 ms while waiting (its README's
// example), no retry for a single attempt.
type bsmC struct {
	c  *redis.Client
	lc *redislock.Client
}

func newBSM(addr string) contender {
	c := newClient(addr)
	return &bsmC{c: c, lc: redislock.New(c)}
}

func (x *bsmC) obtain(ctx context.Context, key string, opt *redislock.Options) (func(context.Context) error, error) {
	l, err := x.lc.Obtain(ctx, key, leaseTTL, opt)
	if err != nil {
		return nil, err
	}
	return l.Release, nil
}

func (x *bsmC) acquire(ctx context.Context, key string) (func(context.Context) error, error) {
	return x.obtain(ctx, key, &redislock.Options{RetryStrategy: redislock.LinearBackoff(100 * time.Millisecond)})
}

func (x *bsmC) try(ctx context.Context, key string) (func(context.Context) error, error) {
	return x.obtain(ctx, key, nil)
}

func (x *bsmC) close() { _ = x.c.Close() }

func mustRelease(rel func(context.Context) error) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := rel(ctx); err != nil {
		panic(fmt.Sprintf("release: %v", err))
	}
}
