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

	dlredis "github.com/distlock/distlock/redislock"

	"github.com/distlock/distlock/backend"
)

var keySeq atomic.Int64

func uniqueKey(prefix string) string {
	return fmt.Sprintf("bench-%s-%d-%d", prefix, time.Now().UnixNano(), keySeq.Add(1))
}

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

// benchUncontended measures one acquire + release of a free key.
func benchUncontended(b *testing.B, lib library) {
	x := lib.make(addr)
	defer x.close()
	ctx := context.Background()
	key := uniqueKey("uncontended")
	for b.Loop() {
		rel, err := x.try(ctx, key)
		if err != nil {
			b.Fatal(err)
		}
		mustRelease(rel)
	}
}

func BenchmarkPing(b *testing.B) { benchPing(b) }

func BenchmarkUncontended(b *testing.B) {
	for _, lib := range libraries {
		b.Run(lib.name, func(b *testing.B) { benchUncontended(b, lib) })
	}
}

// contention is the outcome of workers contending for one key.
type contention struct {
	acquisitions int
	duration     time.Duration
	handoffs     []time.Duration // from a release to the next holder's grant
	waits        [][]time.Duration
	counts       []int
	overlaps     int64 // times two workers held the lock at once (must be 0)
}

// contend runs workers, each with its own client, taking key in a loop for
// d (no work inside the lock, none between acquisitions). A wait still
// unfinished at the end counts with its length so far.
func contend(lib library, workers int, d time.Duration) contention {
	key := uniqueKey("contended")
	xs := make([]contender, workers)
	for i := range xs {
		xs[i] = lib.make(addr)
		defer xs[i].close()
	}
	type event struct {
		got, releasing time.Time
	}
	var mu sync.Mutex
	var events []event
	res := contention{waits: make([][]time.Duration, workers), counts: make([]int, workers)}
	var holders atomic.Int64
	start := time.Now()
	end := start.Add(d)
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			ctx, cancel := context.WithDeadline(context.Background(), end)
			defer cancel()
			for ctx.Err() == nil {
				asked := time.Now()
				rel, err := xs[w].acquire(ctx, key)
				got := time.Now()
				if err != nil {
					res.waits[w] = append(res.waits[w], got.Sub(asked))
					return
				}
				if holders.Add(1) != 1 {
					atomic.AddInt64(&res.overlaps, 1)
				}
				holders.Add(-1)
				releasing := time.Now()
				mustRelease(rel)
				res.waits[w] = append(res.waits[w], got.Sub(asked))
				res.counts[w]++
				mu.Lock()
				events = append(events, event{got, releasing})
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	res.duration = time.Since(start)
	slices.SortFunc(events, func(a, b event) int { return a.got.Compare(b.got) })
	for i := 1; i < len(events); i++ {
		if h := events[i].got.Sub(events[i-1].releasing); h > 0 {
			res.handoffs = append(res.handoffs, h)
		}
	}
	res.acquisitions = len(events)
	return res
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
	prefix := uniqueKey("renew")
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
