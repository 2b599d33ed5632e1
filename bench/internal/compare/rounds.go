package compare

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/distlock/distlock/bench/internal/measure"
)

// summed lists the metrics whose rounds add up (a count of failures)
// rather than give a median.
var summed = map[string]bool{"violations": true}

// combine makes one Result of one target's rounds of one workload: each
// metric is the median of the rounds' values (measure.Median: nearest
// rank, the lower middle of an even count), with their min and max; a
// count of violations is their sum. Samples pool every round's; errors are
// kept with their round's number. Metrics come from the rounds that have
// them; a round that failed before measuring anything adds only its error.
func combine(rounds []Result) Result {
	out := rounds[0]
	out.Metrics, out.Shares, out.Error, out.raw = nil, nil, "", nil
	out.Runs = len(rounds)
	var measured []Result
	var errs []string
	var raw []time.Duration
	for i, r := range rounds {
		if r.Error != "" {
			errs = append(errs, fmt.Sprintf("round %d: %s", i+1, r.Error))
		}
		if len(r.Metrics) > 0 {
			measured = append(measured, r)
			raw = append(raw, r.raw...)
		}
	}
	out.Error = strings.Join(errs, "; ")
	if len(measured) == 0 {
		return out
	}
	for _, m := range AllMetrics(measured) {
		out.Metrics = append(out.Metrics, combineMetric(m, measured))
	}
	if len(raw) > 0 {
		out.Samples = toMS(raw)
	}
	out.Shares = meanShares(measured)
	return out
}

func combineMetric(first Metric, rounds []Result) Metric {
	m := Metric{Name: first.Name, Unit: first.Unit}
	for _, r := range rounds {
		if v, ok := r.Metric(first.Name); ok {
			m.Rounds = append(m.Rounds, v)
		}
	}
	m.Min, m.Max = slices.Min(m.Rounds), slices.Max(m.Rounds)
	m.Value = measure.Median(m.Rounds)
	if summed[m.Name] {
		m.Value = 0
		for _, v := range m.Rounds {
			m.Value += v
		}
	}
	return m
}

// meanShares averages the rounds' per-client shares (nil when no round
// has any).
func meanShares(rounds []Result) []float64 {
	var out []float64
	n := 0
	for _, r := range rounds {
		if len(r.Shares) == 0 {
			continue
		}
		if out == nil {
			out = make([]float64, len(r.Shares))
		}
		for i := range min(len(out), len(r.Shares)) {
			out[i] += r.Shares[i]
		}
		n++
	}
	for i := range out {
		out[i] /= float64(n)
	}
	return out
}
