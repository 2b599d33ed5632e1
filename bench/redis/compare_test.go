package redisbench

import (
	"fmt"
	"os"
	"slices"
	"strings"
	"testing"
	"time"
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
	p("bare PING round trip: %v\n\n", nsPerOp(ping))

	p("uncontended acquire+release (one client, one free key):\n")
	unc := map[string]time.Duration{}
	for _, lib := range libraries {
		r := testing.Benchmark(func(b *testing.B) { benchUncontended(b, lib) })
		unc[lib.name] = nsPerOp(r)
	}
	for _, lib := range libraries {
		p("  %-14s %10v  = %.2f PINGs   distlock/this = %.2f\n", lib.name, unc[lib.name],
			float64(unc[lib.name])/float64(nsPerOp(ping)), float64(unc["distlock"])/float64(unc[lib.name]))
	}

	p("\n%d workers (own client each) on one key for %v, nothing done inside or between:\n", contendWorkers, contendFor)
	p("  %-14s %9s %8s %9s %9s %9s | %9s %9s %9s %7s %7s\n", "library", "acq/s", "dl/this", "hand p50", "hand p99", "hand max", "wait p50", "wait p99", "wait max", "top%", "min%")
	for _, lib := range libraries {
		c := contend(lib, contendWorkers, contendFor)
		if c.overlaps != 0 {
			t.Errorf("%s: two workers held the lock at once %d times", lib.name, c.overlaps)
		}
		rate := float64(c.acquisitions) / c.duration.Seconds()
		if lib.name == "distlock" {
			ourRate = rate
		}
		all := slices.Concat(c.waits...)
		shares := make([]float64, len(c.counts))
		for i, n := range c.counts {
			shares[i] = 100 * float64(n) / float64(max(1, c.acquisitions))
		}
		p("  %-14s %9.0f %8.2f %9v %9v %9v | %9v %9v %9v %6.1f%% %6.1f%%\n", lib.name, rate, ourRate/max(rate, 1e-9),
			pct(c.handoffs, 50), pct(c.handoffs, 99), pct(c.handoffs, 100), pct(all, 50), pct(all, 99), pct(all, 100),
			slices.Max(shares), slices.Min(shares))
		for w := range c.waits {
			p("      worker %d: %5d acquisitions (%5.1f%%), wait p50 %v p99 %v max %v\n", w, c.counts[w], shares[w],
				pct(c.waits[w], 50), pct(c.waits[w], 99), pct(c.waits[w], 100))
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

func nsPerOp(r testing.BenchmarkResult) time.Duration { return time.Duration(r.NsPerOp()) }

// pct returns the p-th percentile of ds (p=100 is the maximum).
func pct(ds []time.Duration, p int) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	i := (len(s)*p + 99) / 100
	i = min(max(i-1, 0), len(s)-1)
	return s[i].Round(10 * time.Microsecond)
}
