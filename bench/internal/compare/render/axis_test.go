package render

import (
	"slices"
	"testing"

	"github.com/distlock/distlock/bench/internal/compare"
)

// Log axes read as numbers with units, never as 1e+01.
func TestLogTicksAndFormats(t *testing.T) {
	var labels []string
	for _, tk := range (logTicks{format: fmtMS}).Ticks(0.002, 3000) {
		if tk.Label != "" {
			labels = append(labels, tk.Label)
		}
	}
	want := []string{"10µs", "100µs", "1ms", "10ms", "100ms", "1s"}
	if !slices.Equal(labels, want) {
		t.Errorf("labels %v, want %v", labels, want)
	}
	fine := (logTicks{format: fmtRate}).Ticks(150, 9000)
	var got []string
	for _, tk := range fine {
		got = append(got, tk.Label)
	}
	if !slices.Equal(got, []string{"200/s", "500/s", "1k/s", "2k/s", "5k/s"}) {
		t.Errorf("fine rate labels %v", got)
	}
	if n := len((logTicks{format: fmtMS, top: 10}).Ticks(1, 1000)); n != 4 {
		t.Errorf("%d ticks on 1–1000 with a top of 10, want 4 (1, 2, 5, 10)", n)
	}
	for v, want := range map[float64]string{0.0019: "1.90µs", 0.418: "418µs", 3.47: "3.47ms", 3000: "3.00s"} {
		if got := fmtMS(v); got != want {
			t.Errorf("fmtMS(%v) = %q, want %q", v, got, want)
		}
	}
	for v, want := range map[float64]string{244363: "244k/s", 2982: "2.98k/s", 357: "357/s", 8.5: "8.50/s", 1.5e6: "1.50M/s"} {
		if got := fmtRate(v); got != want {
			t.Errorf("fmtRate(%v) = %q, want %q", v, got, want)
		}
	}
	if got := trimZeros("2.00µs"); got != "2µs" {
		t.Errorf("trimZeros = %q", got)
	}
}

// A store's rows sit together: distlock, its peers, its floor.
func TestByWorkloadOrder(t *testing.T) {
	rep := &Report{Results: []compare.Result{
		{Backend: "redis: PING", Workload: "w", Store: "redis", Library: "PING", Floor: true},
		{Backend: "mem", Workload: "w", Store: "mem", Library: "distlock"},
		{Backend: "redis: redsync", Workload: "w", Store: "redis", Library: "redsync"},
		{Backend: "redis", Workload: "w", Store: "redis", Library: "distlock"},
		{Backend: "other", Workload: "x"},
	}}
	var got []string
	for _, r := range rep.byWorkload("w") {
		got = append(got, r.Backend)
	}
	if want := []string{"redis", "redis: redsync", "redis: PING", "mem"}; !slices.Equal(got, want) {
		t.Errorf("order %v, want %v", got, want)
	}
}
