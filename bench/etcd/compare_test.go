package etcdbench

import (
	"fmt"
	"maps"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/distlock/distlock/bench/internal/lockbench"
)

// Settings of the comparison. The libraries are measured in alternating
// rounds, so that load from other processes hits both alike; the report
// gives the median and the ratio of each round's pair.
const (
	rounds         = 15
	uncontendedOps = 100
	contendRounds  = 5
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

	unc, err := lockbench.UncontendedRounds(slices.Concat(baselines, libraries), rounds, uncontendedOps)
	if err != nil {
		t.Fatal(err)
	}
	p("uncontended acquire+release (one client, one free key), %d alternating rounds of %d each:\n", rounds, uncontendedOps)
	p("  %-11s %10s %6s %13s  %s\n", "", "median", "Puts", "distlock/this", "per round")
	for _, lib := range slices.Concat(baselines, libraries) {
		m := lockbench.Median(unc[lib.Name])
		p("  %-11s %10v %6.2f %13.2f  %v\n", lib.Name, m.Round(time.Microsecond), float64(m)/float64(lockbench.Median(unc["Put"])),
			float64(lockbench.Median(unc["distlock"]))/float64(m), roundDurations(unc[lib.Name]))
	}
	p("  distlock/etcd-mutex per round: %s\n", roundRatios(unc["distlock"], unc["etcd-mutex"]))
	p("  etcdlock/etcd-mutex per round: %s\n", roundRatios(unc["etcdlock"], unc["etcd-mutex"]))
	p("  requests per acquire+release: %s\n", perAcquisition(func(string) int { return rounds * uncontendedOps }))

	p("\n%d workers (own client and lease each) on one key, %d alternating rounds of %v, nothing done inside or between:\n",
		contendWorkers, contendRounds, contendFor)
	p("  %-11s %8s %9s %9s %9s %9s | %9s %9s %9s %6s %6s %9s\n", "library", "acq/s",
		"rel p50", "hand p50", "hand p99", "hand max", "wait p50", "wait p99", "wait max", "top%", "min%", "overtakes")
	for _, lib := range libraries {
		requestCounts(lib.Name) // count the contended rounds only
	}
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
		p("  %-11s %8.0f %9v %9v %9v %9v | %9v %9v %9v %5.1f%% %5.1f%% %9d\n", lib.Name, lockbench.Median(rates[lib.Name]),
			lockbench.Pct(c.Releases, 50), lockbench.Pct(c.Handoffs, 50), lockbench.Pct(c.Handoffs, 99), lockbench.Pct(c.Handoffs, 100), lockbench.Pct(all, 50), lockbench.Pct(all, 99), lockbench.Pct(all, 100),
			slices.Max(shares), slices.Min(shares), c.Overtakes)
	}
	p("  requests per acquisition: %s\n", perAcquisition(func(lib string) int { return pooled[lib].Acquisitions }))
	p("  throughput distlock / etcd-mutex = %.2f× (median rates); per round: %s\n",
		lockbench.Median(rates["distlock"])/max(lockbench.Median(rates["etcd-mutex"]), 1e-9),
		roundRatios(rates["distlock"], rates["etcd-mutex"]))
	fmt.Fprint(os.Stdout, out.String())
	t.Log("\n" + out.String())
}

// perAcquisition reports the unary requests each library sent since the
// last call, per acquisition (n(library) of them); the setup of each
// benchmark run and its b.N calibration runs are included, so the figures
// are slightly high. Watches are streams and not counted.
func perAcquisition(n func(lib string) int) string {
	var libs []string
	for _, lib := range libraries {
		counts := requestCounts(lib.Name)
		var parts []string
		for _, m := range slices.Sorted(maps.Keys(counts)) {
			parts = append(parts, fmt.Sprintf("%s %.2f", m, float64(counts[m])/float64(max(1, n(lib.Name)))))
		}
		libs = append(libs, lib.Name+": "+strings.Join(parts, " "))
	}
	return strings.Join(libs, "; ")
}

// roundDurations formats ds in milliseconds.
func roundDurations(ds []time.Duration) string {
	var s []string
	for _, d := range ds {
		s = append(s, fmt.Sprintf("%.2f", d.Seconds()*1000))
	}
	return strings.Join(s, " ") + " ms"
}

// roundRatios formats a[i]/b[i] for every round i.
func roundRatios[T time.Duration | float64](a, b []T) string {
	var s []string
	for i := range min(len(a), len(b)) {
		s = append(s, fmt.Sprintf("%.2f", float64(a[i])/max(float64(b[i]), 1e-9)))
	}
	return strings.Join(s, " ")
}
