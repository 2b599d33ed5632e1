package redisbench

import (
	"context"
	"fmt"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/distlock/distlock/bench/internal/lockbench"
	"github.com/distlock/distlock/bench/internal/measure"
)

// Settings of the comparison, overridable for a quicker run.
const (
	contendWorkers = 8
	contendFor     = 5 * time.Second
	renewLeases    = 10000
	renewRounds    = 3
)

// TestCompare runs every scenario for every library in one run and prints
// a side-by-side report with ratios against distlock (go test -v -run
// TestCompare). It asserts only that the locks were exclusive.
func TestCompare(t *testing.T) {
	if testing.Short() {
		t.Skip("short mode")
	}
	var out strings.Builder
	p := func(format string, args ...any) { fmt.Fprintf(&out, format, args...) }

	ping := testing.Benchmark(benchPing)
	p("bare PING round trip: %v\n\n", lockbench.NsPerOp(ping))

	p("uncontended acquire+release (one client, one free key):\n")
	unc := map[string]time.Duration{}
	for _, lib := range libraries {
		r := testing.Benchmark(func(b *testing.B) { lockbench.Uncontended(b, lib.trying()) })
		unc[lib.name] = lockbench.NsPerOp(r)
	}
	for _, lib := range libraries {
		p("  %-14s %10v  = %.2f PINGs   distlock/this = %.2f\n", lib.name, unc[lib.name],
			float64(unc[lib.name])/float64(lockbench.NsPerOp(ping)), float64(unc["distlock"])/float64(unc[lib.name]))
	}

	p("\n%d workers (own client each) on one key for %v, nothing done inside or between:\n", contendWorkers, contendFor)
	p("  %-14s %9s %8s %9s %9s %9s | %9s %9s %9s %7s %7s\n", "library", "acq/s", "dl/this", "hand p50", "hand p99", "hand max", "wait p50", "wait p99", "wait max", "top%", "min%")
	for _, lib := range libraries {
		run := measure.Run{Key: lockbench.UniqueKey("contended"), Workers: contendWorkers, For: contendFor}
		c, err := measure.Contend(context.Background(), lib.waiting(), run)
		if err != nil {
			t.Fatalf("%s: %v", lib.name, err)
		}
		if c.Overlaps != 0 {
			t.Errorf("%s: two workers held the lock at once %d times", lib.name, c.Overlaps)
		}
		if lib.name == "distlock" {
			ourRate = c.Rate()
		}
		hand, wait := lockbench.Summarize(c.Handoffs), lockbench.Summarize(c.AllWaits())
		shares := c.Shares()
		p("  %-14s %9.0f %8.2f %9v %9v %9v | %9v %9v %9v %6.1f%% %6.1f%%\n", lib.name, c.Rate(), ourRate/max(c.Rate(), 1e-9),
			hand.P50, hand.P99, hand.Max, wait.P50, wait.P99, wait.Max, 100*slices.Max(shares), 100*slices.Min(shares))
		for w := range c.Waits {
			ws := lockbench.Summarize(c.Waits[w])
			p("      worker %d: %5d acquisitions (%5.1f%%), wait p50 %v p99 %v max %v\n", w, c.Counts[w], 100*shares[w],
				ws.P50, ws.P99, ws.Max)
		}
	}

	p("\nrenewal of %d held leases (best of %d rounds):\n", renewLeases, renewRounds)
	ren := map[string]renewal{}
	for _, lib := range libraries {
		r, err := renewAll(lib, renewLeases, renewRounds)
		if err != nil {
			t.Fatalf("%s: renewal: %v", lib.name, err)
		}
		ren[lib.name] = r
	}
	for _, lib := range libraries {
		r := ren[lib.name]
		p("  %-14s %10v per round, %5d round trip(s), %v per lease   this/distlock = %.1f\n", lib.name, r.perRound.Round(time.Microsecond),
			r.roundTrips, (r.perRound / time.Duration(r.leases)).Round(time.Nanosecond), float64(r.perRound)/float64(ren["distlock"].perRound))
	}
	t.Log("\n" + out.String())
	if f := os.Getenv("DISTLOCK_BENCH_REPORT"); f != "" {
		if err := os.WriteFile(f, []byte(out.String()), 0o644); err != nil {
			t.Error(err)
		}
	}
}

// ourRate is distlock's acquisitions/s, the base of the ratio column
// (distlock runs first).
var ourRate float64
