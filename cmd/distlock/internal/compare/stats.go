package compare

import (
	"slices"
	"time"
)

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// Metric is one named figure of a result.
type Metric struct {
	Name  string  `json:"name"`
	Unit  string  `json:"unit"`
	Value float64 `json:"value"`
}

// Result is one workload's outcome on one backend.
type Result struct {
	Backend  string   `json:"backend"`
	Workload string   `json:"workload"`
	Metrics  []Metric `json:"metrics"`
	// Samples are the latencies behind the metrics, in milliseconds,
	// sorted and thinned to at most 1000 quantiles, for the charts.
	Samples []float64 `json:"samples_ms,omitempty"`
	// Shares is each client's share of acquisitions (contended only).
	Shares []float64 `json:"shares,omitempty"`
	Error  string    `json:"error,omitempty"`
}

// Metric returns the value of the named metric, and whether it exists.
func (r Result) Metric(name string) (float64, bool) {
	for _, m := range r.Metrics {
		if m.Name == name {
			return m.Value, true
		}
	}
	return 0, false
}

func (r *Result) add(name, unit string, v float64) {
	r.Metrics = append(r.Metrics, Metric{Name: name, Unit: unit, Value: v})
}

// maxSamples bounds the samples a result keeps for its charts.
const maxSamples = 1000

// toMS returns the distribution of ds in milliseconds: sorted, and thinned
// to at most maxSamples evenly spaced quantiles so reports stay small.
func toMS(ds []time.Duration) []float64 {
	s := slices.Clone(ds)
	slices.Sort(s)
	n := min(len(s), maxSamples)
	out := make([]float64, n)
	for i := range out {
		j := i
		if len(s) > maxSamples {
			j = i * (len(s) - 1) / (maxSamples - 1)
		}
		out[i] = ms(s[j])
	}
	return out
}
