package zkbench

import (
	"fmt"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/distlock/distlock/bench/internal/lockbench"
)

// Settings of the comparison. The libraries are measured in alternating
// rounds and the median round is reported, so that load from other
// processes (a ZooKeeper write is an fsync) hits both alike.
const (
	rounds         = 5
	contendRounds  = 3
	contendWorkers = 8
	contendFor     = 3 * time.Second
)

// TestCompare runs every scenario for both libraries in one run and prints
// a side-by-side report with ratios (go test -v -run TestCompare). It
// asserts only that the locks were exclusive.
func TestCompare(t *testing.T) {
	if testing.Short() {
		t.Skip("short mode")
	}
	var out strings.Builder
	p := func(format string, args ...any) { fmt.Fprintf(&out, format, args...) }

	var rts []time.Duration
	unc := map[string][]time.Duration{}
	for r := range rounds {
		rts = append(rts, lockbench.NsPerOp(testing.Benchmark(benchExists)))
		for _, lib := range lockbench.Alternate(libraries, r) {
			unc[lib.Name] = append(unc[lib.Name], lockbench.NsPerOp(testing.Benchmark(func(b *testing.B) { lockbench.Uncontended(b, lib) })))
		}
	}
	rt := lockbench.Median(rts)
	p("bare Exists round trip: %v (median of %d rounds)\n\n", rt, rounds)
	p("uncontended acquire+release (one session, one free key), median of %d alternating rounds:\n", rounds)
	for _, lib := range libraries {
		m := lockbench.Median(unc[lib.Name])
		p("  %-9s %10v = %5.2f round trips   distlock/this = %.2f   rounds %v\n", lib.Name, m,
			float64(m)/float64(rt), float64(lockbench.Median(unc["distlock"]))/float64(m), unc[lib.Name])
	}

	p("\n%d workers (own session each) on one key, %d alternating rounds of %v, nothing done inside or between:\n",
		contendWorkers, contendRounds, contendFor)
	p("  %-9s %8s %9s %9s %9s | %9s %9s %9s %6s %6s %9s\n", "library", "acq/s",
		"hand p50", "hand p99", "hand max", "wait p50", "wait p99", "wait max", "top%", "min%", "overtakes")
	rates, pooled, err := lockbench.ContendRounds(libraries, contendRounds, contendWorkers, contendFor)
	if err != nil {
		t.Error(err)
	}
	if rates == nil {
		t.FailNow()
	}
	for _, lib := range libraries {
		c := pooled[lib.Name]
		all := slices.Concat(c.Waits...)
		shares := c.Shares()
		p("  %-9s %8.0f %9v %9v %9v | %9v %9v %9v %5.1f%% %5.1f%% %9d\n", lib.Name, lockbench.Median(rates[lib.Name]),
			lockbench.Pct(c.Handoffs, 50), lockbench.Pct(c.Handoffs, 99), lockbench.Pct(c.Handoffs, 100), lockbench.Pct(all, 50), lockbench.Pct(all, 99), lockbench.Pct(all, 100),
			slices.Max(shares), slices.Min(shares), c.Overtakes)
	}
	p("  throughput distlock / zk.Lock = %.2f× (median rates; rounds: distlock %.0f, zk.Lock %.0f acq/s)\n",
		lockbench.Median(rates["distlock"])/max(lockbench.Median(rates["zk.Lock"]), 1e-9), rates["distlock"], rates["zk.Lock"])
	fmt.Fprint(os.Stdout, out.String())
	t.Log("\n" + out.String())
}
