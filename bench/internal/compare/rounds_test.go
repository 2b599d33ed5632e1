package compare

import (
	"slices"
	"strings"
	"testing"
	"time"
)

func round(err string, acq, viol float64, raw ...time.Duration) Result {
	r := Result{Backend: "b", Workload: "contended", Store: "s", Library: "distlock", Error: err, raw: raw}
	if acq > 0 {
		r.add("acq/s", "1/s", acq)
		r.add("violations", "", viol)
	}
	return r
}

// Each metric is the median round's value (nearest rank: the lower middle
// of an even count) with the rounds' min and max; violations add up;
// samples pool; errors keep their round.
func TestCombine(t *testing.T) {
	ms := time.Millisecond
	c := combine([]Result{round("", 300, 0, ms), round("", 100, 1, 2*ms), round("boom", 0, 0), round("", 200, 0, 3*ms)})
	m, ok := c.Lookup("acq/s")
	if !ok || m.Value != 200 || m.Min != 100 || m.Max != 300 || !slices.Equal(m.Rounds, []float64{300, 100, 200}) {
		t.Errorf("acq/s = %+v, want the median 200 of 300, 100, 200", m)
	}
	if v, _ := c.Metric("violations"); v != 1 {
		t.Errorf("violations = %v, want the sum 1", v)
	}
	if c.Runs != 4 || c.Error != "round 3: boom" {
		t.Errorf("runs %d, error %q", c.Runs, c.Error)
	}
	if !slices.Equal(c.Samples, []float64{1, 2, 3}) {
		t.Errorf("samples %v, want every round's pooled and sorted", c.Samples)
	}
	even := combine([]Result{round("", 10, 0), round("", 40, 0)})
	if v, _ := even.Metric("acq/s"); v != 10 {
		t.Errorf("median of 10 and 40 = %v, want the lower middle 10", v)
	}
	failed := combine([]Result{round("a", 0, 0), round("b", 0, 0)})
	if len(failed.Metrics) != 0 || !strings.Contains(failed.Error, "round 2: b") {
		t.Errorf("all rounds failed: %+v", failed)
	}
}
