package etcdbench

import (
	"fmt"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/distlock/distlock/bench/internal/lockbench"
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
	p("bare Put round trip: %v\n\n", lockbench.NsPerOp(put))

	p("uncontended acquire+release (one client, one free key):\n")
	unc := map[string]time.Duration{}
	for _, lib := range libraries {
		unc[lib.Name] = lockbench.NsPerOp(testing.Benchmark(func(b *testing.B) { lockbench.Uncontended(b, lib) }))
	}
	for _, lib := range libraries {
		p("  %-11s %10v  = %.2f Puts   distlock/this = %.2f\n", lib.Name, unc[lib.Name],
			float64(unc[lib.Name])/float64(lockbench.NsPerOp(put)), float64(unc["distlock"])/float64(unc[lib.Name]))
	}

	p("\n%d workers (own client and lease each) on one key for %v, nothing done inside or between:\n", contendWorkers, contendFor)
	p("  %-11s %8s %8s %9s %9s %9s | %9s %9s %9s %6s %6s %9s\n", "library", "acq/s", "x mutex",
		"hand p50", "hand p99", "hand max", "wait p50", "wait p99", "wait max", "top%", "min%", "overtakes")
	rates := map[string]float64{}
	for _, lib := range libraries {
		c, err := lockbench.Contend(lib, contendWorkers, contendFor)
		if err != nil {
			t.Fatalf("%s: %v", lib.Name, err)
		}
		if c.Overlaps != 0 {
			t.Errorf("%s: two workers held the lock at once %d times", lib.Name, c.Overlaps)
		}
		rates[lib.Name] = float64(c.Acquisitions) / c.Duration.Seconds()
		all := slices.Concat(c.Waits...)
		shares := make([]float64, len(c.Counts))
		for i, n := range c.Counts {
			shares[i] = 100 * float64(n) / float64(max(1, c.Acquisitions))
		}
		p("  %-11s %8.0f %8s %9v %9v %9v | %9v %9v %9v %5.1f%% %5.1f%% %9d\n", lib.Name, rates[lib.Name], "",
			lockbench.Pct(c.Handoffs, 50), lockbench.Pct(c.Handoffs, 99), lockbench.Pct(c.Handoffs, 100), lockbench.Pct(all, 50), lockbench.Pct(all, 99), lockbench.Pct(all, 100),
			slices.Max(shares), slices.Min(shares), c.Overtakes)
	}
	p("  throughput distlock / etcd-mutex = %.1f×\n", rates["distlock"]/max(rates["etcd-mutex"], 1e-9))
	fmt.Fprint(os.Stdout, out.String())
	t.Log("\n" + out.String())
}
