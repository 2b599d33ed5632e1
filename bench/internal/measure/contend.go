package measure

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"
)

// Contender is one client of a lock library, as one process would hold
// it. A contended run calls it from one goroutine only.
type Contender interface {
	// Acquire blocks until key is held or ctx ends, and returns the
	// function that releases the lock.
	Acquire(ctx context.Context, key string) (release func(context.Context) error, err error)
	// Close frees the contender's client.
	Close()
}

// AcquireFunc is a [Contender] made of an acquire function, with nothing to
// close.
type AcquireFunc func(ctx context.Context, key string) (release func(context.Context) error, err error)

// Acquire calls f.
func (f AcquireFunc) Acquire(ctx context.Context, key string) (func(context.Context) error, error) {
	return f(ctx, key)
}

// Close does nothing.
func (AcquireFunc) Close() {}

// Library makes contenders of one lock library, or of one configuration
// of it.
type Library struct {
	// Name labels the library in reports.
	Name string
	// Make returns a new contender with its own client.
	Make func() (Contender, error)
}

// Run sizes one contended run.
type Run struct {
	// Key is the one key the workers contend for (required).
	Key string
	// Workers is how many contenders take part, each made by the library
	// and driven by its own goroutine (at least 1).
	Workers int
	// For is how long workers go on asking for the lock. An acquisition
	// asked for before the end may complete up to [Grace] after it.
	For time.Duration
	// WarmUp has each contender take and free the key once before the
	// clock starts (rows created, pools filled).
	WarmUp bool
}

// Grace is how long after a run's end an acquisition asked for before it
// may still complete; one still waiting then counts as a wait as long as
// it lasted, not as an error.
const Grace = time.Second

// ReleaseTimeout bounds each release call of a contended run.
const ReleaseTimeout = 10 * time.Second

// Contend makes run.Workers contenders of lib and has each take
// run.Key in a loop for run.For, with nothing done inside or between
// acquisitions, and closes them. The error is the first a worker met
// (a worker stops at its first): the Contention holds what was measured
// until then.
func Contend(ctx context.Context, lib Library, run Run) (Contention, error) {
	if run.Key == "" {
		return Contention{}, errors.New("measure: a contended run needs a key")
	}
	xs := make([]Contender, 0, max(1, run.Workers))
	defer func() {
		for _, x := range xs {
			x.Close()
		}
	}()
	for range cap(xs) {
		x, err := lib.Make()
		if err != nil {
			return Contention{}, err
		}
		xs = append(xs, x)
		if run.WarmUp {
			if _, err := Pairs(ctx, x, run.Key, 1, 0); err != nil {
				return Contention{}, fmt.Errorf("warm-up: %w", err)
			}
		}
	}
	return contend(ctx, xs, run.Key, run.For)
}

// recorder collects a contended run's samples.
type recorder struct {
	mu       sync.Mutex
	grants   []grant
	holders  atomic.Int64
	overlaps atomic.Int64
	waits    [][]time.Duration // one slice per worker, written by it alone
	counts   []int
}

func contend(ctx context.Context, xs []Contender, key string, d time.Duration) (Contention, error) {
	rec := &recorder{waits: make([][]time.Duration, len(xs)), counts: make([]int, len(xs))}
	errs := make([]error, len(xs))
	start := time.Now()
	end := start.Add(d)
	var wg sync.WaitGroup
	for w, x := range xs {
		wg.Go(func() { errs[w] = rec.work(ctx, w, x, key, end) })
	}
	wg.Wait()
	c := Contention{Duration: time.Since(start), Waits: rec.waits, Counts: rec.counts, Overlaps: rec.overlaps.Load()}
	c.fromGrants(rec.grants)
	for _, err := range errs {
		if err != nil {
			return c, err
		}
	}
	return c, nil
}

// work is worker w's loop: ask, hold for no time, release, until end.
func (rec *recorder) work(ctx context.Context, w int, x Contender, key string, end time.Time) error {
	actx, cancel := context.WithDeadline(ctx, end.Add(Grace))
	defer cancel()
	for time.Now().Before(end) {
		asked := time.Now()
		release, err := x.Acquire(actx, key)
		got := time.Now()
		if err != nil {
			if ctx.Err() == nil && actx.Err() != nil { // cut off by the end
				rec.waits[w] = append(rec.waits[w], got.Sub(asked))
				return nil
			}
			return err
		}
		if rec.holders.Add(1) != 1 {
			rec.overlaps.Add(1)
		}
		rec.waits[w] = append(rec.waits[w], got.Sub(asked))
		rec.counts[w]++
		rec.holders.Add(-1)
		releasing := time.Now()
		err = releaseWithin(ctx, release)
		rec.mu.Lock()
		rec.grants = append(rec.grants, grant{asked: asked, got: got, releasing: releasing, released: time.Now()})
		rec.mu.Unlock()
		if err != nil {
			return fmt.Errorf("release: %w", err)
		}
	}
	return nil
}

// releaseWithin calls release with a context of its own, bounded by
// ReleaseTimeout, that ctx's cancellation does not end: a lock is freed
// even when the run is being given up.
func releaseWithin(ctx context.Context, release func(context.Context) error) error {
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), ReleaseTimeout)
	defer cancel()
	return release(rctx)
}

// Pairs times up to n acquire + release pairs of key by x, one after the
// other, and returns each pair's time; it stops early once limit has
// passed since the first (0: no limit). The error is the first failed
// call's, with the pairs timed before it.
func Pairs(ctx context.Context, x Contender, key string, n int, limit time.Duration) ([]time.Duration, error) {
	return PairsTimed(ctx, x, key, n, limit, time.Now)
}

// PairsTimed is [Pairs] with the time read from now instead of time.Now
// (a fake clock makes a test's timings exact).
func PairsTimed(ctx context.Context, x Contender, key string, n int, limit time.Duration, now func() time.Time) ([]time.Duration, error) {
	out := make([]time.Duration, 0, n)
	start := now()
	for range n {
		if limit > 0 && now().Sub(start) >= limit {
			break
		}
		t0 := now()
		release, err := x.Acquire(ctx, key)
		if err != nil {
			return out, err
		}
		if err := release(ctx); err != nil {
			return out, fmt.Errorf("release: %w", err)
		}
		out = append(out, now().Sub(t0))
	}
	return out, nil
}
