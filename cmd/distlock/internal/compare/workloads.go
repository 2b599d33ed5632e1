package compare

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/distlock/distlock/internal/measure"
)

// Config sizes the workloads. Zero values take the defaults.
type Config struct {
	Iterations int           // uncontended acquire+release pairs (200)
	Workers    int           // clients in contended and many-keys (8)
	Duration   time.Duration // length of the contended and many-keys runs (5s)
	TTL        time.Duration // lease TTL; crash recovery is bounded by it (3s)
	Exe        string        // the distlock binary, for crash-recovery holders
	Workloads  []string      // which workloads to run (all)
}

// Workloads lists the workload names in the order they run.
var Workloads = []string{"uncontended", "contended", "many-keys", "crash-recovery"}

func (c Config) withDefaults() Config {
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
	if c.Iterations < 0 || c.Workers < 0 || c.Duration < 0 || c.TTL < 0 {
		return fmt.Errorf("iterations, workers, duration and ttl must not be negative")
	}
	return nil
}

// Steps returns how many (target, workload) steps Run will make.
func (c Config) Steps(targets []Target) int {
	return len(targets) * len(c.withDefaults().Workloads)
}

// Run runs every workload on every target, one after the other, calling
// step after each. A failing workload is reported in its Result.
func Run(ctx context.Context, targets []Target, c Config, step func(Result)) []Result {
	c = c.withDefaults()
	var out []Result
	for _, t := range targets {
		for _, w := range c.Workloads {
			r := runOne(ctx, t, w, c)
			out = append(out, r)
			if step != nil {
				step(r)
			}
		}
	}
	return out
}

func runOne(ctx context.Context, t Target, w string, c Config) Result {
	r := Result{Backend: t.Name, Workload: w}
	var err error
	switch w {
	case "uncontended":
		err = uncontended(ctx, t, c, &r)
	case "contended":
		err = contended(ctx, t, c, &r)
	case "many-keys":
		err = manyKeys(ctx, t, c, &r)
	case "crash-recovery":
		err = crashRecovery(ctx, t, c, &r)
	}
	if err != nil {
		r.Error = err.Error()
	}
	return r
}

func uniqueKey(prefix string) string {
	var b [6]byte
	_, _ = rand.Read(b[:])
	return "bench/" + prefix + "/" + hex.EncodeToString(b[:])
}

func uncontended(ctx context.Context, t Target, c Config, r *Result) error {
	l, err := t.open(ctx, c.TTL)
	if err != nil {
		return err
	}
	defer l.Close()
	start := time.Now()
	lat, err := measure.Pairs(ctx, lockerContender{l}, uniqueKey("uncontended"), c.Iterations, c.Duration*4)
	if err != nil {
		return err
	}
	s := measure.Summarize(lat)
	r.add("p50", "ms", ms(s.P50))
	r.add("p99", "ms", ms(s.P99))
	r.add("pairs/s", "1/s", float64(len(lat))/time.Since(start).Seconds())
	r.Samples = toMS(lat)
	return nil
}

// contended: every worker is its own client, competing for one key.
func contended(ctx context.Context, t Target, c Config, r *Result) error {
	run := measure.Run{Key: uniqueKey("contended"), Workers: c.Workers, For: c.Duration}
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
	r.Samples = toMS(res.Handoffs)
	return err
}

func manyKeys(ctx context.Context, t Target, c Config, r *Result) error {
	ls, err := t.openN(ctx, c.Workers, c.TTL)
	if err != nil {
		return err
	}
	defer closeAll(ls)
	prefix := uniqueKey("many")
	var total atomic.Int64
	errs := make([]error, len(ls))
	var wg sync.WaitGroup
	deadline := time.Now().Add(c.Duration)
	for i, l := range ls {
		wg.Go(func() {
			for n := 0; time.Now().Before(deadline); n++ {
				le, err := l.Acquire(ctx, fmt.Sprintf("%s/%d/%d", prefix, i, n%16))
				if err == nil {
					err = le.Release(ctx)
				}
				if err != nil {
					errs[i] = err
					return
				}
				total.Add(1)
			}
		})
	}
	wg.Wait()
	r.add("acq/s", "1/s", float64(total.Load())/c.Duration.Seconds())
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
