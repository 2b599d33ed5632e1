package redisbench

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/bsm/redislock"
	"github.com/go-redsync/redsync/v4"
	"github.com/go-redsync/redsync/v4/redis/goredis/v9"

	"github.com/distlock/distlock/backend"
	"github.com/distlock/distlock/bench/internal/lockbench"
	dlredis "github.com/distlock/distlock/redislock"
)

// benchPing measures a bare PING round trip.
func benchPing(b *testing.B) {
	c := newClient(addr)
	defer c.Close()
	ctx := context.Background()
	for b.Loop() {
		if err := c.Ping(ctx).Err(); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkPing(b *testing.B) { benchPing(b) }

func BenchmarkUncontended(b *testing.B) {
	for _, lib := range append(slices.Clone(libraries), fencedLib) {
		b.Run(lib.name, func(b *testing.B) { lockbench.Uncontended(b, lib.trying()) })
	}
}

// renewal is the cost of renewing many held leases once.
type renewal struct {
	leases     int
	perRound   time.Duration
	roundTrips int
}

// renewAll holds n leases of lib and measures one renewal of all of them,
// the best of rounds; peers renew with 64 goroutines (their one-call-per-
// lock API), distlock with its driver's pipelined RefreshAll (what its
// watchdog calls).
func renewAll(lib library, n, rounds int) (renewal, error) {
	ctx := context.Background()
	prefix := lockbench.UniqueKey("renew")
	key := func(i int) string { return fmt.Sprintf("%s-%d", prefix, i) }
	var round func() error
	var cleanup func()
	trips := n
	c := newClient(addr)
	defer c.Close()
	switch lib.name {
	case "distlock", "distlock-notify":
		d, err := dlredis.New(c, nil)
		if err != nil {
			return renewal{}, err
		}
		locks := make([]backend.Lock, n)
		ttls := make([]time.Duration, n)
		err = parallel(n, func(i int) error {
			g, err := d.TryAcquire(ctx, backend.Request{Key: key(i), Owner: prefix, TTL: leaseTTL})
			locks[i], ttls[i] = g.Lock, leaseTTL
			return err
		})
		if err != nil {
			return renewal{}, err
		}
		round = func() error {
			for _, err := range d.RefreshAll(ctx, locks, ttls) {
				if err != nil {
					return err
				}
			}
			return nil
		}
		cleanup = func() { _ = parallel(n, func(i int) error { return locks[i].Release(ctx) }); _ = d.Close() }
		trips = 1
	case "redsync":
		rs := redsync.New(goredis.NewPool(c))
		ms := make([]*redsync.Mutex, n)
		err := parallel(n, func(i int) error {
			ms[i] = rs.NewMutex(key(i), redsync.WithExpiry(leaseTTL), redsync.WithTries(1))
			return ms[i].LockContext(ctx)
		})
		if err != nil {
			return renewal{}, err
		}
		round = func() error {
			return parallel(n, func(i int) error {
				ok, err := ms[i].ExtendContext(ctx)
				if err == nil && !ok {
					err = fmt.Errorf("redsync: extend failed")
				}
				return err
			})
		}
		cleanup = func() { _ = parallel(n, func(i int) error { _, err := ms[i].UnlockContext(ctx); return err }) }
	default:
		lc := redislock.New(c)
		ls := make([]*redislock.Lock, n)
		err := parallel(n, func(i int) error {
			var err error
			ls[i], err = lc.Obtain(ctx, key(i), leaseTTL, nil)
			return err
		})
		if err != nil {
			return renewal{}, err
		}
		round = func() error {
			return parallel(n, func(i int) error { return ls[i].Refresh(ctx, leaseTTL, nil) })
		}
		cleanup = func() { _ = parallel(n, func(i int) error { return ls[i].Release(ctx) }) }
	}
	defer cleanup()
	best := time.Duration(0)
	for range rounds {
		t0 := time.Now()
		if err := round(); err != nil {
			return renewal{}, err
		}
		if took := time.Since(t0); best == 0 || took < best {
			best = took
		}
	}
	return renewal{leases: n, perRound: best, roundTrips: trips}, nil
}

// parallel runs fn(0..n-1) on 64 goroutines and returns the first error.
func parallel(n int, fn func(i int) error) error {
	var next atomic.Int64
	var firstErr error
	var once sync.Once
	var wg sync.WaitGroup
	for range 64 {
		wg.Go(func() {
			for {
				i := int(next.Add(1) - 1)
				if i >= n {
					return
				}
				if err := fn(i); err != nil {
					once.Do(func() { firstErr = err })
				}
			}
		})
	}
	wg.Wait()
	return firstErr
}
