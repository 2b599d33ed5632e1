package compare

import (
	"strings"
	"testing"
)

// distlock's figures are divided by each peer's of the same store only;
// a figure missing on either side is "–", never a ratio against zero.
func TestRatios(t *testing.T) {
	res := func(backend, store, library, workload, metric string, v float64, floor bool) Result {
		return Result{Backend: backend, Store: store, Library: library, Workload: workload, Floor: floor,
			Metrics: []Metric{{Name: metric, Value: v}}}
	}
	rep := &Report{
		Backends: []BackendInfo{
			{Name: "redis", Store: "redis", Library: "distlock"},
			{Name: "redis: redsync", Store: "redis", Library: "redsync"},
			{Name: "redis: floor (PING)", Store: "redis", Library: "PING", Floor: true},
			{Name: "mysql", Store: "mysql", Library: "distlock"},
			{Name: "mysql: GET_LOCK", Store: "mysql", Library: "GET_LOCK"},
		},
		Results: []Result{
			res("redis", "redis", "distlock", "uncontended", "p50", 0.3, false),
			res("redis: redsync", "redis", "redsync", "uncontended", "p50", 0.2, false),
			res("redis: floor (PING)", "redis", "PING", "uncontended", "p50", 0.1, true),
			res("redis", "redis", "distlock", "contended", "acq/s", 1000, false),
			res("redis: redsync", "redis", "redsync", "contended", "acq/s", 0, false),
			res("mysql", "mysql", "distlock", "uncontended", "p50", 0.5, false),
			res("mysql: GET_LOCK", "mysql", "GET_LOCK", "uncontended", "p50", 1.0, false),
		},
	}
	rows := rep.ratios()
	if len(rows) != 2 || rows[0].Peer != "redsync" || rows[1].Peer != "GET_LOCK" {
		t.Fatalf("rows = %+v, want redsync and GET_LOCK", rows)
	}
	if got := rows[0].Cells[0]; got != "1.50×" {
		t.Errorf("redis uncontended p50 ratio = %q, want 1.50×", got)
	}
	if got := rows[0].Cells[1]; got != "–" {
		t.Errorf("ratio against a zero rate = %q, want –", got)
	}
	if got := rows[1].Cells[0]; got != "0.50×" {
		t.Errorf("mysql uncontended p50 ratio = %q, want 0.50×", got)
	}
	var b strings.Builder
	if err := rep.writeRatios(&b); err != nil || !strings.Contains(b.String(), "distlock ÷ peer") {
		t.Errorf("writeRatios: %v\n%s", err, b.String())
	}
}
