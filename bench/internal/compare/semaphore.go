package compare

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/distlock/distlock"
	"github.com/distlock/distlock/bench/internal/measure"
)

// The semaphore workload: c.SemaphoreWorkers clients, each its own Locker
// as separate processes would be, share one semaphore of c.Permits
// permits for c.Duration: each takes one permit, holds it for
// c.SemaphoreHold (default no time), releases it, again and again. It reports the acquisitions per second
// of all clients together, their waits, and the most permits seen held at
// once, which must never exceed c.Permits (every grant that would is a
// violation). Only distlock runs it (the peers have no semaphore); a
// distlock backend without one is reported unsupported, not failed.

// errNoSemaphore marks a target whose backend offers no semaphore.
var errNoSemaphore = errors.New("no semaphore on this backend")

// lockerClient is a client of a distlock target: its Close closes the
// Locker and whatever client the Locker was made over.
type lockerClient interface {
	measure.Contender
	Locker() *distlock.Locker
}

// locker returns a client of the target with connections of its own, or
// an error matching errNoSemaphore when the target is not distlock.
func (t Target) locker(ctx context.Context, ttl time.Duration) (lockerClient, error) {
	x, err := t.client(ctx, ttl)
	if err != nil {
		return nil, err
	}
	lc, ok := x.(lockerClient)
	if !ok {
		x.Close()
		return nil, fmt.Errorf("%s: %w: not a distlock Locker", t.Name, errNoSemaphore)
	}
	return lc, nil
}

func semaphoreRun(ctx context.Context, t Target, c Config, r *Result) error {
	key := uniqueKey("semaphore")
	clients := make([]lockerClient, 0, c.SemaphoreWorkers)
	defer func() {
		for _, x := range clients {
			x.Close()
		}
	}()
	sems := make([]*distlock.Semaphore, 0, c.SemaphoreWorkers)
	for range c.SemaphoreWorkers {
		x, err := t.locker(ctx, c.TTL)
		if err != nil {
			return unsupportedOr(r, err)
		}
		clients = append(clients, x)
		s, err := x.Locker().Semaphore(key, c.Permits)
		if err != nil {
			return unsupportedOr(r, err)
		}
		sems = append(sems, s)
	}
	// Warm up: every client takes and frees a permit once (connections
	// dialled, sessions made).
	for i, s := range sems {
		wctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		le, err := s.Acquire(wctx)
		if err == nil {
			err = le.Release(wctx)
		}
		cancel()
		if err != nil {
			return fmt.Errorf("warm-up of client %d: %w", i, err)
		}
	}
	var inside, most, violations atomic.Int64
	var grants atomic.Int64
	waits := make([][]time.Duration, len(sems))
	errs := make([]error, len(sems))
	start := time.Now()
	end := start.Add(c.Duration)
	var wg sync.WaitGroup
	for i, s := range sems {
		wg.Go(func() {
			for time.Now().Before(end) {
				asked := time.Now()
				actx, cancel := context.WithDeadline(ctx, end)
				le, err := s.Acquire(actx)
				cancel()
				if err != nil {
					if time.Now().Before(end) && ctx.Err() == nil {
						errs[i] = err
					}
					return
				}
				waits[i] = append(waits[i], time.Since(asked))
				now := inside.Add(1)
				if now > int64(c.Permits) {
					violations.Add(1)
				}
				for m := most.Load(); now > m && !most.CompareAndSwap(m, now); m = most.Load() {
				}
				grants.Add(1)
				if c.SemaphoreHold > 0 {
					time.Sleep(c.SemaphoreHold)
				}
				inside.Add(-1)
				if err := releaseWithin(ctx, le); err != nil {
					errs[i] = err
					return
				}
			}
		})
	}
	wg.Wait()
	elapsed := time.Since(start)
	if grants.Load() == 0 {
		return fmt.Errorf("no acquisition in %v: %w", c.Duration, firstErr(errs))
	}
	var all []time.Duration
	for _, w := range waits {
		all = append(all, w...)
	}
	wait := measure.Summarize(all)
	r.add("acq/s", "1/s", float64(grants.Load())/elapsed.Seconds())
	r.add("wait p50", "ms", ms(wait.P50))
	r.add("wait p99", "ms", ms(wait.P99))
	r.add("max holders", "", float64(most.Load()))
	r.add("violations", "", float64(violations.Load()))
	r.raw = all
	return firstErr(errs)
}

// unsupportedOr records err as the target's lack of a semaphore when it is
// one, and returns nil then; other errors are returned.
func unsupportedOr(r *Result, err error) error {
	switch {
	case errors.Is(err, distlock.ErrUnsupported):
		r.Unsupported = "the backend offers no semaphore"
		return nil
	case errors.Is(err, errNoSemaphore):
		r.Unsupported = "not a distlock Locker"
		return nil
	}
	return err
}

// releaseWithin releases le, bounded by 10 s.
func releaseWithin(ctx context.Context, le *distlock.Lease) error {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	return le.Release(ctx)
}
