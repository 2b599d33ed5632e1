package etcdbench

import (
	"fmt"
	"os"
	"slices"
	"strings"
	"testing"
	"time"
)

// Settings of the comparison.
const (
	contendWorkers = 8
	contendFor     = 5 * time.Second
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

	put := testing.Benchmark(benchPut)
	p("bare Put round trip: %v\n\n", nsPerOp(put))

	p("uncontended acquire+release (one client, one free key):\n")
	unc := map[string]time.Duration{}
	for _, lib := range libraries {
		unc[lib.name] = nsPerOp(testing.Benchmark(func(b *testing.B) { benchUncontended(b, lib) }))
	}
	for _, lib := range libraries {
		p("  %-11s %10v  = %.2f Puts   distlock/this = %.2f\n", lib.name, unc[lib.name],
			float64(unc[lib.name])/float64(nsPerOp(put)), float64(unc["distlock"])/float64(unc[lib.name]))
	}

	p("\n%d workers (own client and lease each) on one key for %v, nothing done inside or between:\n", contendWorkers, contendFor)
	p("  %-11s %8s %8s %9s %9s %9s | %9s %9s %9s %6s %6s %9s\n", "library", "acq/s", "x mutex",
		"hand p50", "hand p99", "hand max", "wait p50", "wait p99", "wait max", "top%", "min%", "overtakes")
	rates := map[string]float64{}
	for _, lib := range libraries {
		c, err := contend(lib, contendWorkers, contendFor)
		if err != nil {
			t.Fatalf("%s: %v", lib.name, err)
		}
		if c.overlaps != 0 {
			t.Errorf("%s: two workers held the lock at once %d times", lib.name, c.overlaps)
		}
		rates[lib.name] = float64(c.acquisitions) / c.duration.Seconds()
		all := slices.Concat(c.waits...)
		shares := make([]float64, len(c.counts))
		for i, n := range c.counts {
			shares[i] = 100 * float64(n) / float64(max(1, c.acquisitions))
		}
		p("  %-11s %8.0f %8s %9v %9v %9v | %9v %9v %9v %5.1f%% %5.1f%% %9d\n", lib.name, rates[lib.name], "",
			pct(c.handoffs, 50), pct(c.handoffs, 99), pct(c.handoffs, 100), pct(all, 50), pct(all, 99), pct(all, 100),
			slices.Max(shares), slices.Min(shares), c.overtakes)
	}
	p("  throughput distlock / etcd-mutex = %.1f×\n", rates["distlock"]/max(rates["etcd-mutex"], 1e-9))
	fmt.Fprint(os.Stdout, out.String())
	t.Log("\n" + out.String())
}
