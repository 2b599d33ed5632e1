package compare

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"

	"github.com/distlock/distlock"
	"github.com/distlock/distlock/bench/internal/measure"
)

// The rw workload: c.RWWorkers clients, each its own Locker as separate
// processes would be, share one read-write lock for c.Duration: each
// takes the read side (c.RWReads percent of the time) or the write side,
// holds it for c.RWHold (default no time), releases it, again and again.
// It reports the read and write acquisitions per second of all clients
// together, the read and write waits, the most readers seen holding at
// once, and violations: a grant that found a writer counted in, or a
// writer's grant that found anyone counted in. Only distlock runs it; a
// distlock backend without native read-write locks is reported
// unsupported, not failed.

func rwRun(ctx context.Context, t Target, c Config, r *Result) error {
	key := uniqueKey("rw")
	clients := make([]lockerClient, 0, c.RWWorkers)
	defer func() {
		for _, x := range clients {
			x.Close()
		}
	}()
	mus := make([]*distlock.RWMutex, 0, c.RWWorkers)
	for range c.RWWorkers {
		x, err := t.locker(ctx, c.TTL)
		if err != nil {
			return unsupportedRW(r, err)
		}
		clients = append(clients, x)
		m, err := x.Locker().RWMutex(key)
		if err != nil {
			return unsupportedRW(r, err)
		}
		mus = append(mus, m)
	}
	// Warm up: every client takes and frees each side once (connections
	// dialled, sessions made).
	for i, m := range mus {
		wctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		err := warmRW(wctx, m)
		cancel()
		if err != nil {
			return fmt.Errorf("warm-up of client %d: %w", i, err)
		}
	}
	var readers, writers, most, violations atomic.Int64
	var reads, writes atomic.Int64
	readWaits := make([][]time.Duration, len(mus))
	writeWaits := make([][]time.Duration, len(mus))
	errs := make([]error, len(mus))
	start := time.Now()
	end := start.Add(c.Duration)
	var wg sync.WaitGroup
	for i, m := range mus {
		wg.Go(func() {
			rng := rand.New(rand.NewPCG(uint64(i), uint64(start.UnixNano())))
			for time.Now().Before(end) {
				read := rng.IntN(100) < c.RWReads
				asked := time.Now()
				actx, cancel := context.WithDeadline(ctx, end)
				var le *distlock.Lease
				var err error
				if read {
					le, err = m.RLock(actx)
				} else {
					le, err = m.Lock(actx)
				}
				cancel()
				if err != nil {
					if time.Now().Before(end) && ctx.Err() == nil {
						errs[i] = err
					}
					return
				}
				waited := time.Since(asked)
				// Count in after the grant and out before the release, so
				// a counted overlap is an overlap in the store.
				if read {
					readWaits[i] = append(readWaits[i], waited)
					now := readers.Add(1)
					if writers.Load() > 0 {
						violations.Add(1)
					}
					for x := most.Load(); now > x && !most.CompareAndSwap(x, now); x = most.Load() {
					}
					reads.Add(1)
				} else {
					writeWaits[i] = append(writeWaits[i], waited)
					if writers.Add(1) > 1 || readers.Load() > 0 {
						violations.Add(1)
					}
					writes.Add(1)
				}
				if c.RWHold > 0 {
					time.Sleep(c.RWHold)
				}
				if read {
					readers.Add(-1)
				} else {
					writers.Add(-1)
				}
				if err := releaseWithin(ctx, le); err != nil {
					errs[i] = err
					return
				}
			}
		})
	}
	wg.Wait()
	elapsed := time.Since(start)
	if reads.Load()+writes.Load() == 0 {
		return fmt.Errorf("no acquisition in %v: %w", c.Duration, firstErr(errs))
	}
	var rw, ww []time.Duration
	for i := range mus {
		rw, ww = append(rw, readWaits[i]...), append(ww, writeWaits[i]...)
	}
	rs, ws := measure.Summarize(rw), measure.Summarize(ww)
	r.add("acq/s", "1/s", float64(reads.Load()+writes.Load())/elapsed.Seconds())
	r.add("read acq/s", "1/s", float64(reads.Load())/elapsed.Seconds())
	r.add("write acq/s", "1/s", float64(writes.Load())/elapsed.Seconds())
	if len(rw) > 0 {
		r.add("read wait p99", "ms", ms(rs.P99))
	}
	if len(ww) > 0 {
		r.add("write wait p50", "ms", ms(ws.P50))
		r.add("write wait p99", "ms", ms(ws.P99))
	}
	r.add("max readers", "", float64(most.Load()))
	r.add("violations", "", float64(violations.Load()))
	r.raw = append(rw, ww...)
	return firstErr(errs)
}

// warmRW takes and frees the read side, then the write side.
func warmRW(ctx context.Context, m *distlock.RWMutex) error {
	for _, take := range []func(context.Context, ...distlock.Option) (*distlock.Lease, error){m.RLock, m.Lock} {
		le, err := take(ctx)
		if err != nil {
			return err
		}
		if err := le.Release(ctx); err != nil {
			return err
		}
	}
	return nil
}

// unsupportedRW records err as the target's lack of read-write locks when
// it is one, and returns nil then; other errors are returned.
func unsupportedRW(r *Result, err error) error {
	switch {
	case errors.Is(err, distlock.ErrUnsupported):
		r.Unsupported = "the backend has no read-write lock"
		return nil
	case errors.Is(err, errNoSemaphore):
		r.Unsupported = "not a distlock Locker"
		return nil
	}
	return err
}
