package zkbench

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
		for _, lib := range measure.Rotate(libraries, r) {
			unc[lib.Name] = append(unc[lib.Name], lockbench.NsPerOp(testing.Benchmark(func(b *testing.B) { lockbench.Uncontended(b, lib) })))
		}
	}
	rt := measure.Median(rts)
	p("bare Exists round trip: %v (median of %d rounds)\n\n", rt, rounds)
	p("uncontended acquire+release (one session, one free key), median of %d alternating rounds:\n", rounds)
	for _, lib := range libraries {
		m := measure.Median(unc[lib.Name])
		p("  %-9s %10v = %5.2f round trips   distlock/this = %.2f   rounds %v\n", lib.Name, m,
			float64(m)/float64(rt), float64(measure.Median(unc["distlock"]))/float64(m), unc[lib.Name])
	}

	p("\n%d workers (own session each) on one key, %d alternating rounds of %v, nothing done inside or between:\n",
		contendWorkers, contendRounds, contendFor)
	p("  %-9s %8s %9s %9s %9s | %9s %9s %9s %6s %6s %9s\n", "library", "acq/s",
		"hand p50", "hand p99", "hand max", "wait p50", "wait p99", "wait max", "top%", "min%", "overtakes")
	run := measure.Run{Key: lockbench.UniqueKey("contended"), Workers: contendWorkers, For: contendFor}
	rs, err := measure.ContendRounds(context.Background(), libraries, contendRounds, run)
	if err != nil {
		t.Error(err)
	}
	if rs == nil {
		t.FailNow()
	}
	for _, lib := range libraries {
		c := rs[lib.Name].Pooled()
		hand, wait := lockbench.Summarize(c.Handoffs), lockbench.Summarize(c.AllWaits())
		shares := c.Shares()
		p("  %-9s %8.0f %9v %9v %9v | %9v %9v %9v %5.1f%% %5.1f%% %9d\n", lib.Name, measure.Median(rs[lib.Name].Rates()),
			hand.P50, hand.P99, hand.Max, wait.P50, wait.P99, wait.Max, 100*slices.Max(shares), 100*slices.Min(shares), c.Overtakes)
	}
	dl, zl := rs["distlock"].Rates(), rs["zk.Lock"].Rates()
	p("  throughput distlock / zk.Lock = %.2f× (median rates; rounds: distlock %.0f, zk.Lock %.0f acq/s)\n",
		measure.Median(dl)/max(measure.Median(zl), 1e-9), dl, zl)
	fmt.Fprint(os.Stdout, out.String())
	t.Log("\n" + out.String())
}
