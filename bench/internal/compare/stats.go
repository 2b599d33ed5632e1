package compare

import (
	"slices"
	"time"
)

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// Metric is one named figure of a result: over several rounds, the median
// round's value with the smallest and largest.
type Metric struct {
	Name  string  `json:"name"`
	Unit  string  `json:"unit"`
	Value float64 `json:"value"`
	// Min and Max are the smallest and largest of the rounds' values
	// (Value's when there was one round).
	Min float64 `json:"min"`
	Max float64 `json:"max"`
	// Rounds holds each round's value, in the order they ran.
	Rounds []float64 `json:"rounds,omitempty"`
}

// Result is one workload's outcome on one target.
type Result struct {
	// Backend is the target's name (unique in a run).
	Backend  string `json:"backend"`
	Workload string `json:"workload"`
	// Store and Library say what the target is ("redis", "redsync"; the
	// library is "distlock" for distlock itself); Floor marks a store's
	// bare round trip.
	Store   string `json:"store,omitempty"`
	Library string `json:"library,omitempty"`
	Floor   bool   `json:"floor,omitempty"`
	// Runs is how many rounds ran (and failed or not).
	Runs    int      `json:"runs,omitempty"`
	Metrics []Metric `json:"metrics"`
	// Samples are the latencies behind the metrics, in milliseconds,
	// every round's pooled, sorted and thinned to at most 1000 quantiles,
	// for the charts.
	Samples []float64 `json:"samples_ms,omitempty"`
	// Shares is each client's share of acquisitions (contended only),
	// averaged over the rounds.
	Shares []float64 `json:"shares,omitempty"`
	Error  string    `json:"error,omitempty"`
	// Unsupported says why the target cannot run the workload (a backend
	// without a semaphore): not a failure.
	Unsupported string `json:"unsupported,omitempty"`

	raw []time.Duration // one round's samples, before combining
}

// StoreName returns the store the result's target runs on.
func (r Result) StoreName() string {
	if r.Store == "" {
		return r.Backend
	}
	return r.Store
}

// Metric returns the value of the named metric, and whether it exists.
func (r Result) Metric(name string) (float64, bool) {
	m, ok := r.Lookup(name)
	return m.Value, ok
}

// Lookup returns the named metric, and whether it exists.
func (r Result) Lookup(name string) (Metric, bool) {
	for _, m := range r.Metrics {
		if m.Name == name {
			return m, true
		}
	}
	return Metric{}, false
}

func (r *Result) add(name, unit string, v float64) {
	r.Metrics = append(r.Metrics, Metric{Name: name, Unit: unit, Value: v, Min: v, Max: v})
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

// AllMetrics returns the metrics of rows, each name once, in the order
// they first appear.
func AllMetrics(rows []Result) []Metric {
	var out []Metric
	for _, r := range rows {
		for _, m := range r.Metrics {
			if !slices.ContainsFunc(out, func(o Metric) bool { return o.Name == m.Name }) {
				out = append(out, m)
			}
		}
	}
	return out
}
