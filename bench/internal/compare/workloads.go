package compare

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/distlock/distlock"
	"github.com/distlock/distlock/bench/internal/measure"
)

// Config sizes the workloads. Zero values take the defaults.
type Config struct {
	Iterations int           // uncontended acquire+release pairs (200)
	Workers    int           // clients in contended and many-keys (8)
	Duration   time.Duration // length of the contended and many-keys runs (5s)
	TTL        time.Duration // lease TTL; crash recovery is bounded by it (3s)
	Rounds     int           // times every workload runs on every target (3)
	Exe        string        // a program calling HolderMain first thing, for crash-recovery holders (os.Executable)
	Workloads  []string      // which workloads to run (all)
	// Permits and SemaphoreWorkers size the semaphore workload: clients
	// sharing one semaphore of Permits permits (4 permits, 16 clients).
	Permits          int
	SemaphoreWorkers int
	SemaphoreHold    time.Duration // how long a permit is held (0)
	// RWWorkers, RWReads and RWHold size the rw workload: clients sharing
	// one read-write lock (16), the percentage of their acquisitions that
	// take the read side (1 to 100; 90), and how long a side is held (0).
	RWWorkers int
	RWReads   int
	RWHold    time.Duration

	clock func() time.Time // the uncontended workload's clock (nil: time.Now)
}

// now reads the uncontended workload's clock.
func (c Config) now() time.Time {
	if c.clock == nil {
		return time.Now()
	}
	return c.clock()
}

// Workloads lists the workload names in the order they run.
var Workloads = []string{"uncontended", "contended", "many-keys", "semaphore", "rw", "crash-recovery"}

// WithDefaults returns c with every size left zero set to its default.
func (c Config) WithDefaults() Config {
	if c.Iterations <= 0 {
		c.Iterations = 200
	}
	if c.Workers <= 0 {
		c.Workers = 8
	}
	if c.Duration <= 0 {
		c.Duration = 5 * time.Second
	}
	if c.TTL <= 0 {
		c.TTL = 3 * time.Second
	}
	if c.Rounds <= 0 {
		c.Rounds = 3
	}
	if c.Permits <= 0 {
		c.Permits = 4
	}
	if c.SemaphoreWorkers <= 0 {
		c.SemaphoreWorkers = 16
	}
	if c.RWWorkers <= 0 {
		c.RWWorkers = 16
	}
	if c.RWReads <= 0 {
		c.RWReads = 90
	}
	if len(c.Workloads) == 0 {
		c.Workloads = Workloads
	}
	return c
}

// Validate reports a configuration error naming the bad field.
func (c Config) Validate() error {
	for _, w := range c.Workloads {
		if !slices.Contains(Workloads, w) {
			return fmt.Errorf("unknown workload %q (want some of %v)", w, Workloads)
		}
	}
	if c.Iterations < 0 || c.Workers < 0 || c.Duration < 0 || c.TTL < 0 || c.Rounds < 0 || c.Permits < 0 || c.SemaphoreWorkers < 0 || c.SemaphoreHold < 0 {
		return fmt.Errorf("iterations, workers, duration, ttl, rounds, permits and semaphore workers and semaphore hold must not be negative")
	}
	if c.RWWorkers < 0 || c.RWHold < 0 || c.RWReads < 0 || c.RWReads > 100 {
		return fmt.Errorf("rw workers and rw hold must not be negative, and rw reads is a percentage (at most 100)")
	}
	if c.Permits > distlock.MaxSemaphoreLimit {
		return fmt.Errorf("permits %d is above the most a semaphore may have (%d)", c.Permits, distlock.MaxSemaphoreLimit)
	}
	return nil
}

// Steps returns how many (workload, round, target) steps Run will make.
func (c Config) Steps(targets []Target) int {
	c = c.WithDefaults()
	n := 0
	for _, w := range c.Workloads {
		for _, t := range targets {
			if t.runs(w) {
				n += c.Rounds
			}
		}
	}
	return n
}

// Run runs every workload on every target, c.Rounds times, calling step
// after each run with its result and round (from 0). Within a workload,
// round r takes the targets in the order of measure.Rotate(targets, r), so
// that load from other processes hits every target alike: one after the
// other, except in the uncontended workload, where a store's targets run
// together, taking turns in short slices (see [uncontendedRound]). It
// returns one Result per workload and target, combining the rounds (see
// [combine]); a failing run is reported in its Result.
func Run(ctx context.Context, targets []Target, c Config, step func(r Result, round int)) []Result {
	c = c.WithDefaults()
	order := make([]int, len(targets))
	for i := range order {
		order[i] = i
	}
	var out []Result
	for _, w := range c.Workloads {
		rounds := make([][]Result, len(targets))
		for r := range c.Rounds {
			for _, batch := range batches(targets, measure.Rotate(order, r), w) {
				for k, res := range runBatch(ctx, targets, batch, w, c, r) {
					rounds[batch[k]] = append(rounds[batch[k]], res)
					if step != nil {
						step(res, r)
					}
				}
			}
		}
		for _, rs := range rounds {
			if len(rs) > 0 {
				out = append(out, combine(rs))
			}
		}
	}
	return out
}

// batches splits the targets (indices in the order given) that take part
// in workload w into the groups that run together: one group per store in
// the uncontended workload, one target per group in every other.
func batches(targets []Target, order []int, w string) [][]int {
	var out [][]int
	group := map[string]int{}
	for _, i := range order {
		t := targets[i]
		if !t.runs(w) {
			continue
		}
		if w != "uncontended" {
			out = append(out, []int{i})
			continue
		}
		g, ok := group[t.StoreName()]
		if !ok {
			g = len(out)
			group[t.StoreName()] = g
			out = append(out, nil)
		}
		out[g] = append(out[g], i)
	}
	return out
}

// runBatch runs round r of workload w on one group of targets and returns
// their results, in the group's order.
func runBatch(ctx context.Context, targets []Target, batch []int, w string, c Config, r int) []Result {
	if w == "uncontended" {
		ts := make([]Target, len(batch))
		for k, i := range batch {
			ts[k] = targets[i]
		}
		return uncontendedRound(ctx, ts, c, r)
	}
	return []Result{runOne(ctx, targets[batch[0]], w, c)}
}

// runOne runs workload w (any but uncontended) on t.
func runOne(ctx context.Context, t Target, w string, c Config) Result {
	r := newResult(t, w)
	var err error
	switch w {
	case "contended":
		err = contended(ctx, t, c, &r)
	case "many-keys":
		err = manyKeys(ctx, t, c, &r)
	case "semaphore":
		err = semaphoreRun(ctx, t, c, &r)
	case "rw":
		err = rwRun(ctx, t, c, &r)
	case "crash-recovery":
		err = crashRecovery(ctx, t, c, &r)
	}
	if err != nil {
		r.Error = err.Error()
	}
	return r
}

func newResult(t Target, w string) Result {
	return Result{Backend: t.Name, Workload: w, Store: t.StoreName(), Library: t.LibraryName(), Floor: t.Floor}
}

func uniqueKey(prefix string) string {
	var b [6]byte
	_, _ = rand.Read(b[:])
	return "bench/" + prefix + "/" + hex.EncodeToString(b[:])
}

// contended: every worker is its own client, competing for one key. A
// floor has one worker: its rate is one client's round trips back to back.
func contended(ctx context.Context, t Target, c Config, r *Result) error {
	run := measure.Run{Key: uniqueKey("contended"), Workers: c.Workers, For: c.Duration, WarmUp: true}
	if t.Floor {
		run.Workers = 1
	}
	res, err := measure.Contend(ctx, t.library(ctx, c.TTL), run)
	if res.Acquisitions == 0 {
		return fmt.Errorf("no acquisition in %v: %w", c.Duration, err)
	}
	hand, wait := measure.Summarize(res.Handoffs), measure.Summarize(res.AllWaits())
	r.add("acq/s", "1/s", res.Rate())
	r.add("handoff p50", "ms", ms(hand.P50))
	r.add("handoff p99", "ms", ms(hand.P99))
	r.add("wait p50", "ms", ms(wait.P50))
	r.add("wait p99", "ms", ms(wait.P99))
	r.add("wait max", "ms", ms(wait.Max))
	r.add("max share", "x fair", res.MaxShare())
	r.add("violations", "", float64(res.Overlaps))
	r.Shares = res.Shares()
	r.raw = res.Handoffs
	return err
}

// manyKeys: every worker is its own client with a key of its own, all at
// once; the rate is the sum of the workers' rates.
func manyKeys(ctx context.Context, t Target, c Config, r *Result) error {
	prefix := uniqueKey("many")
	lib := t.library(ctx, c.TTL)
	runs := make([]measure.Contention, c.Workers)
	errs := make([]error, c.Workers)
	var wg sync.WaitGroup
	for i := range c.Workers {
		wg.Go(func() {
			run := measure.Run{Key: fmt.Sprintf("%s/%d", prefix, i), Workers: 1, For: c.Duration, WarmUp: true}
			runs[i], errs[i] = measure.Contend(ctx, lib, run)
		})
	}
	wg.Wait()
	rate := 0.0
	for _, run := range runs {
		rate += run.Rate()
	}
	r.add("acq/s", "1/s", rate)
	return firstErr(errs)
}

func firstErr(errs []error) error {
	for _, e := range errs {
		if e != nil {
			return e
		}
	}
	return nil
}
