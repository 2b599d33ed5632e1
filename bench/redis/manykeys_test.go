package redisbench

import (
	"context"
	"fmt"
	"math"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/distlock/distlock"
	"github.com/distlock/distlock/bench/internal/lockbench"
	"github.com/distlock/distlock/bench/internal/measure"
	dlredis "github.com/distlock/distlock/redislock"
)

// TestManyKeys is distlock-bench's many-keys workload (8 clients, each
// its own client and key, waiting Acquire and a release with a timeout:
// measure.Contend with one worker per key) in rotating rounds, with
// distlock as the comparison builds it, with WithReleaseOnCaller, and
// with that on a go-redis client with ContextTimeoutEnabled (the driver
// then runs its calls on the caller's goroutine too: no hand-off in the
// pair), against the fenced floor and the peers, each round's ratio
// against the fenced floor and bsm/redislock.
//
//	cd bench && DISTLOCK_SANDBOX=local go test -count=1 -run TestManyKeys -v ./redis/
//
// DISTLOCK_BENCH_ROUNDS (default 3) and DISTLOCK_BENCH_SECONDS (each
// run, default 2) size it; DISTLOCK_BENCH_ONLY names the one library to
// run (for a profile; the ratios then read NaN).
func TestManyKeys(t *testing.T) {
	if testing.Short() {
		t.Skip("short mode")
	}
	rounds := envInt("DISTLOCK_BENCH_ROUNDS", 3)
	d := time.Duration(envInt("DISTLOCK_BENCH_SECONDS", 2)) * time.Second
	dl := func(ctxTimeouts bool, opts ...distlock.LockerOption) func(string) contender {
		return func(addr string) contender {
			c := redis.NewClient(&redis.Options{Addr: addr, PoolSize: 64, ContextTimeoutEnabled: ctxTimeouts})
			drv, err := dlredis.New(c, nil)
			if err != nil {
				panic(err)
			}
			return &lockbench.LockerContender{L: distlock.New(drv, append([]distlock.LockerOption{distlock.WithDefaultTTL(leaseTTL)}, opts...)...),
				CloseClient: func() { _ = c.Close() }}
		}
	}
	libs := []library{
		{name: "distlock", make: dl(false)},
		{name: "distlock oncaller", make: dl(false, distlock.WithReleaseOnCaller())},
		{name: "distlock oncaller+ctxtimeout", make: dl(true, distlock.WithReleaseOnCaller())},
		fencedLib,
		{name: "bsm/redislock", make: newBSM},
		{name: "redsync", make: newRedsync},
	}
	if only := os.Getenv("DISTLOCK_BENCH_ONLY"); only != "" { // one library, e.g. for -cpuprofile
		libs = slices.DeleteFunc(libs, func(l library) bool { return l.name != only })
		if len(libs) == 0 {
			t.Fatalf("DISTLOCK_BENCH_ONLY=%q names no library", only)
		}
	}
	rates := map[string][]float64{}
	for i := range rounds {
		for _, lib := range measure.Rotate(libs, i) {
			rate, err := manyKeysRate(lib.waiting(), contendWorkers, d)
			if err != nil {
				t.Fatalf("%s: %v", lib.name, err)
			}
			rates[lib.name] = append(rates[lib.name], rate)
		}
	}
	var out strings.Builder
	fmt.Fprintf(&out, "%d clients on a key each, %v runs, %d rotating rounds; ratios: median of the rounds' own\n", contendWorkers, d, rounds)
	fmt.Fprintf(&out, "  %-30s %10s %14s %14s   %s\n", "library", "acq/s", "/fenced floor", "/bsm", "per round acq/s")
	for _, lib := range libs {
		r := rates[lib.name]
		var fl, bs []float64
		for i := range r {
			if len(rates[fencedLib.name]) == len(r) && len(rates["bsm/redislock"]) == len(r) {
				fl = append(fl, r[i]/rates[fencedLib.name][i])
				bs = append(bs, r[i]/rates["bsm/redislock"][i])
			}
		}
		if fl == nil {
			fl, bs = []float64{math.NaN()}, []float64{math.NaN()}
		}
		per := make([]string, len(r))
		for i, v := range r {
			per[i] = fmt.Sprintf("%.0f", v)
		}
		fmt.Fprintf(&out, "  %-30s %10.0f %14.2f %14.2f   %s\n", lib.name, measure.Median(r), measure.Median(fl), measure.Median(bs), strings.Join(per, " "))
	}
	t.Log("\n" + out.String())
}

// manyKeysRate runs workers clients of lib, each on a key of its own, for
// d, and returns their acquisitions per second together.
func manyKeysRate(lib measure.Library, workers int, d time.Duration) (float64, error) {
	prefix := lockbench.UniqueKey("many")
	runs := make([]measure.Contention, workers)
	errs := make([]error, workers)
	var wg sync.WaitGroup
	for i := range workers {
		wg.Go(func() {
			run := measure.Run{Key: fmt.Sprintf("%s/%d", prefix, i), Workers: 1, For: d, WarmUp: true}
			runs[i], errs[i] = measure.Contend(context.Background(), lib, run)
		})
	}
	wg.Wait()
	rate := 0.0
	for i, run := range runs {
		if errs[i] != nil {
			return 0, errs[i]
		}
		rate += run.Rate()
	}
	return rate, nil
}
