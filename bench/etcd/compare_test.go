package etcdbench

import (
	"context"
	"fmt"
	"maps"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/distlock/distlock/bench/internal/lockbench"
	"github.com/distlock/distlock/bench/internal/measure"
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

	ctx := context.Background()
	all := slices.Concat(baselines, libraries)
	unc, err := measure.UncontendedRounds(ctx, all, rounds, uncontendedOps, lockbench.UniqueKey("uncontended"))
	if err != nil {
		t.Fatal(err)
	}
	p("uncontended acquire+release (one client, one free key), %d alternating rounds of %d each:\n", rounds, uncontendedOps)
	p("  %-11s %10s %6s %13s  %s\n", "", "median", "Puts", "distlock/this", "per round")
	for _, lib := range all {
		m := measure.Median(unc[lib.Name])
		p("  %-11s %10v %6.2f %13.2f  %v\n", lib.Name, m.Round(time.Microsecond), float64(m)/float64(measure.Median(unc["Put"])),
			float64(measure.Median(unc["distlock"]))/float64(m), roundDurations(unc[lib.Name]))
	}
	p("  distlock/etcd-mutex per round: %s\n", roundRatios(unc["distlock"], unc["etcd-mutex"]))
	p("  etcdlock/etcd-mutex per round: %s\n", roundRatios(unc["etcdlock"], unc["etcd-mutex"]))
	p("  requests per acquire+release: %s\n", perAcquisition(func(string) int { return rounds * uncontendedOps }))

	p("\n%d workers (own client and lease each) on one key, %d alternating rounds of %v, nothing done inside or between:\n",
		contendWorkers, contendRounds, contendFor)
	p("  %-11s %8s %9s %9s %9s %9s %9s | %9s %9s %9s %6s %6s %9s\n", "library", "acq/s",
		"rel p50", "rel p99", "hand p50", "hand p99", "hand max", "wait p50", "wait p99", "wait max", "top%", "min%", "overtakes")
	for _, lib := range libraries {
		requestCounts(lib.Name) // count the contended rounds only
	}
	run := measure.Run{Key: lockbench.UniqueKey("contended"), Workers: contendWorkers, For: contendFor}
	rs, err := measure.ContendRounds(ctx, libraries, contendRounds, run)
	if err != nil {
		t.Error(err)
	}
	if rs == nil {
		t.FailNow()
	}
	pooled := map[string]measure.Contention{}
	for _, lib := range libraries {
		c := rs[lib.Name].Pooled()
		pooled[lib.Name] = c
		rel, hand, wait := lockbench.Summarize(c.Releases), lockbench.Summarize(c.Handoffs), lockbench.Summarize(c.AllWaits())
		shares := c.Shares()
		p("  %-11s %8.0f %9v %9v %9v %9v %9v | %9v %9v %9v %5.1f%% %5.1f%% %9d\n", lib.Name, measure.Median(rs[lib.Name].Rates()),
			rel.P50, rel.P99, hand.P50, hand.P99, hand.Max, wait.P50, wait.P99, wait.Max, 100*slices.Max(shares), 100*slices.Min(shares), c.Overtakes)
	}
	p("  requests per acquisition: %s\n", perAcquisition(func(lib string) int { return pooled[lib].Acquisitions }))
	if d, m := lockbench.Summarize(pooled["distlock"].Handoffs), lockbench.Summarize(pooled["etcd-mutex"].Handoffs); m.P99 > 0 {
		p("  hand-off p99 distlock / etcd-mutex = %.2f×; distlock hand-off p99 / its release p99 = %.2f×\n",
			float64(d.P99)/float64(m.P99), float64(d.P99)/float64(max(lockbench.Summarize(pooled["distlock"].Releases).P99, 1)))
	}
	p("  throughput distlock / etcd-mutex = %.2f× (median rates); per round: %s\n",
		measure.Median(rs["distlock"].Rates())/max(measure.Median(rs["etcd-mutex"].Rates()), 1e-9),
		roundRatios(rs["distlock"].Rates(), rs["etcd-mutex"].Rates()))
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
