// Package lockbench holds what the per-store comparisons of the bench
// module share: the contender interface every compared library is wrapped
// in, the contended run that measures them alike, and a server for the
// run.
package lockbench

import (
	"context"
	"errors"
	"fmt"
	"os"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/distlock/distlock/sandbox"
)

// Contender is one lock library as a process would use it: its own client
// and session.
type Contender interface {
	// Acquire blocks until key is held or ctx ends.
	Acquire(ctx context.Context, key string) (release func(context.Context) error, err error)
	Close()
}

// Library makes contenders of one library.
type Library struct {
	Name string
	Make func() (Contender, error)
}

var keySeq atomic.Int64

// UniqueKey returns a key no other run uses.
func UniqueKey(prefix string) string {
	return fmt.Sprintf("bench-%s-%d-%d", prefix, time.Now().UnixNano(), keySeq.Add(1))
}

// Uncontended measures one acquire + release of a free key.
func Uncontended(b *testing.B, lib Library) {
	x, err := lib.Make()
	if err != nil {
		b.Fatal(err)
	}
	defer x.Close()
	ctx := context.Background()
	key := UniqueKey("uncontended")
	for b.Loop() {
		rel, err := x.Acquire(ctx, key)
		if err != nil {
			b.Fatal(err)
		}
		if err := rel(ctx); err != nil {
			b.Fatal(err)
		}
	}
}

// Contention is the outcome of workers contending for one key.
type Contention struct {
	Acquisitions int
	Duration     time.Duration
	Handoffs     []time.Duration // from a release's start to the next holder's grant
	Releases     []time.Duration // release calls, start to return
	Waits        [][]time.Duration
	Counts       []int
	Overlaps     int64 // times two workers held the lock at once (must be 0)
	Overtakes    int   // grants to a worker that queued after one still waiting
}

// Merge pools b's samples into c (workers by index); c may be nil.
func (c *Contention) Merge(b Contention) *Contention {
	if c == nil {
		return &b
	}
	c.Acquisitions += b.Acquisitions
	c.Duration += b.Duration
	c.Handoffs = append(c.Handoffs, b.Handoffs...)
	c.Releases = append(c.Releases, b.Releases...)
	for i := range c.Waits {
		c.Waits[i] = append(c.Waits[i], b.Waits[i]...)
		c.Counts[i] += b.Counts[i]
	}
	c.Overlaps += b.Overlaps
	c.Overtakes += b.Overtakes
	return c
}

// Contend runs workers, each its own contender, taking one key in a loop
// for d with nothing done inside or between acquisitions.
func Contend(lib Library, workers int, d time.Duration) (Contention, error) {
	key := UniqueKey("contended")
	xs := make([]Contender, workers)
	for i := range xs {
		x, err := lib.Make()
		if err != nil {
			return Contention{}, err
		}
		xs[i] = x
		defer x.Close()
	}
	type event struct{ asked, got, releasing, released time.Time }
	var mu sync.Mutex
	var events []event
	res := Contention{Waits: make([][]time.Duration, workers), Counts: make([]int, workers)}
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
				rel, err := xs[w].Acquire(ctx, key)
				got := time.Now()
				res.Waits[w] = append(res.Waits[w], got.Sub(asked))
				if err != nil {
					return
				}
				if holders.Add(1) != 1 {
					atomic.AddInt64(&res.Overlaps, 1)
				}
				holders.Add(-1)
				releasing := time.Now()
				rctx, rcancel := context.WithTimeout(context.Background(), 10*time.Second)
				_ = rel(rctx)
				released := time.Now()
				rcancel()
				res.Counts[w]++
				mu.Lock()
				events = append(events, event{asked, got, releasing, released})
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	res.Duration = time.Since(start)
	slices.SortFunc(events, func(a, b event) int { return a.got.Compare(b.got) })
	for _, e := range events {
		res.Releases = append(res.Releases, e.released.Sub(e.releasing))
	}
	for i := 1; i < len(events); i++ {
		if h := events[i].got.Sub(events[i-1].releasing); h > 0 {
			res.Handoffs = append(res.Handoffs, h)
		}
	}
	// FIFO: a grant overtakes when an earlier grant's request came after
	// its own and the two waits overlapped. Asking times are taken before
	// the request is sent, so near-ties (under 1 ms) are measurement noise.
	for i := 1; i < len(events); i++ {
		if events[i].asked.Before(events[i-1].asked) && events[i].asked.Before(events[i-1].got) &&
			events[i-1].asked.Sub(events[i].asked) > time.Millisecond {
			res.Overtakes++
		}
	}
	res.Acquisitions = len(events)
	return res, nil
}

// Pct returns the p-th percentile of ds (p = 100: the maximum).
func Pct(ds []time.Duration, p int) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	return s[(len(s)-1)*p/100].Round(10 * time.Microsecond)
}

// NsPerOp returns a benchmark result's time per operation.
func NsPerOp(r testing.BenchmarkResult) time.Duration { return time.Duration(r.NsPerOp()) }

// Main starts one server of kind for a comparison package's tests, sets
// *addr to its address, runs them, and stops it.
func Main(m *testing.M, kind sandbox.Kind, addr *string) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	g, err := sandbox.Start(ctx, sandbox.Spec{Kind: kind})
	cancel()
	if err != nil {
		fmt.Fprintf(os.Stderr, "lockbench: no %s server: %v\n", kind, err)
		os.Exit(1)
	}
	*addr = g.Addrs()[0]
	code := m.Run()
	if err := g.Close(); err != nil {
		fmt.Fprintln(os.Stderr, "lockbench:", err)
	}
	os.Exit(code)
}

// Alternate returns libs in round r's order: reversed every other round,
// so that no library always runs first.
func Alternate(libs []Library, r int) []Library {
	libs = slices.Clone(libs)
	if r%2 == 1 {
		slices.Reverse(libs)
	}
	return libs
}

// Median returns the median of xs (the upper one of an even count).
func Median[T time.Duration | float64](xs []T) T {
	s := slices.Clone(xs)
	slices.Sort(s)
	return s[len(s)/2]
}

// UncontendedRounds measures acquire + release of a free key for every
// library in short rounds that alternate between them (ops acquisitions
// per library and round, the order reversed every other round), so that
// load from other processes hits all of them alike. Each library keeps one
// contender for all rounds. It returns every library's mean time per
// acquire + release in each round.
func UncontendedRounds(libs []Library, rounds, ops int) (map[string][]time.Duration, error) {
	xs := map[string]Contender{}
	defer func() {
		for _, x := range xs {
			x.Close()
		}
	}()
	for _, lib := range libs {
		x, err := lib.Make()
		if err != nil {
			return nil, fmt.Errorf("%s: %w", lib.Name, err)
		}
		xs[lib.Name] = x
	}
	ctx := context.Background()
	key := UniqueKey("uncontended")
	out := map[string][]time.Duration{}
	for r := range rounds {
		for _, lib := range Alternate(libs, r) {
			x := xs[lib.Name]
			start := time.Now()
			for range ops {
				rel, err := x.Acquire(ctx, key)
				if err != nil {
					return nil, fmt.Errorf("%s: %w", lib.Name, err)
				}
				if err := rel(ctx); err != nil {
					return nil, fmt.Errorf("%s: release: %w", lib.Name, err)
				}
			}
			out[lib.Name] = append(out[lib.Name], time.Since(start)/time.Duration(ops))
		}
	}
	return out, nil
}

// ContendRounds runs Contend for every library in rounds that alternate
// the order (see Alternate), and returns each library's acquisitions/s per
// round and its contention pooled over the rounds. Overlaps (two holders
// at once) are reported as errors, after all rounds ran.
func ContendRounds(libs []Library, rounds, workers int, d time.Duration) (rates map[string][]float64, pooled map[string]*Contention, err error) {
	rates, pooled = map[string][]float64{}, map[string]*Contention{}
	var errs []error
	for r := range rounds {
		for _, lib := range Alternate(libs, r) {
			c, err := Contend(lib, workers, d)
			if err != nil {
				return nil, nil, fmt.Errorf("%s: %w", lib.Name, err)
			}
			if c.Overlaps != 0 {
				errs = append(errs, fmt.Errorf("%s: two workers held the lock at once %d times", lib.Name, c.Overlaps))
			}
			rates[lib.Name] = append(rates[lib.Name], float64(c.Acquisitions)/c.Duration.Seconds())
			pooled[lib.Name] = pooled[lib.Name].Merge(c)
		}
	}
	return rates, pooled, errors.Join(errs...)
}

// Shares returns each worker's share of c's acquisitions, in percent.
func (c *Contention) Shares() []float64 {
	shares := make([]float64, len(c.Counts))
	for i, n := range c.Counts {
		shares[i] = 100 * float64(n) / float64(max(1, c.Acquisitions))
	}
	return shares
}
