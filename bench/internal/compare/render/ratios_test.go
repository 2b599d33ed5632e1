package render

import (
	"github.com/distlock/distlock/bench/internal/compare"
	"math"
	"strings"
	"testing"
)

// distlock's figures are divided by each peer's of the same store only;
// a figure missing on either side is "–", never a ratio against zero.
func TestRatios(t *testing.T) {
	res := func(backend, store, library, workload, metric string, v float64, floor bool) compare.Result {
		return compare.Result{Backend: backend, Store: store, Library: library, Workload: workload, Floor: floor,
			Metrics: []compare.Metric{{Name: metric, Value: v}}}
	}
	rep := &Report{
		Backends: []BackendInfo{
			{Name: "redis", Store: "redis", Library: "distlock"},
			{Name: "redis: redsync", Store: "redis", Library: "redsync"},
			{Name: "redis: floor (PING)", Store: "redis", Library: "PING", Floor: true},
			{Name: "mysql", Store: "mysql", Library: "distlock"},
			{Name: "mysql: GET_LOCK", Store: "mysql", Library: "GET_LOCK"},
		},
		Results: []compare.Result{
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
	if got := rows[0].Cells[0].Text; got != "1.50×" {
		t.Errorf("redis uncontended p50 ratio = %q, want 1.50×", got)
	}
	if got := rows[0].Cells[1].Text; got != "–" {
		t.Errorf("ratio against a zero rate = %q, want –", got)
	}
	if got := rows[1].Cells[0].Text; got != "0.50×" {
		t.Errorf("mysql uncontended p50 ratio = %q, want 0.50×", got)
	}
	var b strings.Builder
	if err := rep.writeRatios(&b); err != nil || !strings.Contains(b.String(), "distlock ÷ peer") || !strings.Contains(b.String(), "1.50× worse") || !strings.Contains(b.String(), "0.50× better") {
		t.Errorf("writeRatios: %v\n%s", err, b.String())
	}
}

// A fenced floor (the least lock with a token, written in the benchmark)
// gets its row of distlock ÷ it, before the store's peers, and the bare
// round trip none.
func TestRatiosFencedFloor(t *testing.T) {
	res := func(backend, library string, v float64) compare.Result {
		return compare.Result{Backend: backend, Store: "redis", Library: library, Workload: "many-keys",
			Metrics: []compare.Metric{{Name: "acq/s", Value: v}}}
	}
	fenced := "fenced floor (SET NX PX + INCR)"
	rep := &Report{
		Backends: []BackendInfo{
			{Name: "redis", Store: "redis", Library: "distlock"},
			{Name: "redis: bsm/redislock", Store: "redis", Library: "bsm/redislock"},
			{Name: "redis: " + fenced, Store: "redis", Library: fenced, Fenced: true},
			{Name: "redis: floor (PING)", Store: "redis", Library: "PING", Floor: true},
		},
		Results: []compare.Result{res("redis", "distlock", 900), res("redis: bsm/redislock", "bsm/redislock", 1000),
			res("redis: "+fenced, fenced, 1200)},
	}
	rows := rep.ratios()
	if len(rows) != 2 || rows[0].Peer != fenced || !rows[0].Fenced || rows[1].Peer != "bsm/redislock" {
		t.Fatalf("rows = %+v, want the fenced floor, then bsm/redislock", rows)
	}
	if got := rows[0].Cells[4].Text; got != "0.75×" {
		t.Errorf("many keys ÷ fenced floor = %q, want 0.75×", got)
	}
}

// The ratio pairs rounds: each round's figure over the peer's in the same
// round, then the median. A ratio of the two medians would pair distlock's
// fast round with the peer's slow one (session 11's run 1: rounds of 1.19,
// 1.17 and 0.48 against bsm/redislock, reported as 0.54 by medians).
func TestRatiosPairRounds(t *testing.T) {
	m := func(v float64, rounds ...float64) compare.Metric {
		return compare.Metric{Name: "p50", Value: v, Rounds: rounds}
	}
	for _, tc := range []struct {
		name         string
		mine, theirs compare.Metric
		want         float64
		ok           bool
	}{
		{"paired", m(0.086, 0.062, 0.186, 0.086), m(0.159, 0.052, 0.159, 0.177), 0.186 / 0.159, true},
		{"one round", m(0.3, 0.3), m(0.2, 0.2), 1.5, true},
		{"no rounds", m(0.3), m(0.2), 1.5, true},
		{"rounds differ in number", m(0.3, 0.3, 0.1), m(0.2, 0.2, 0.2, 0.2), 1.5, true},
		{"a zero round: medians", m(4, 2, 4, 6), m(2, 0, 2, 2), 2, true},
		{"a zero peer", m(4, 2, 4), m(0, 0, 0), 0, false},
	} {
		got, ok := pairedRatio(tc.mine, tc.theirs)
		if ok != tc.ok || (ok && math.Abs(got-tc.want) > 1e-9) {
			t.Errorf("%s: pairedRatio = %v, %v; want %v, %v", tc.name, got, ok, tc.want, tc.ok)
		}
	}
	// And in the report's table.
	rep := &Report{
		Backends: []BackendInfo{
			{Name: "redis", Store: "redis", Library: "distlock"},
			{Name: "redis: bsm/redislock", Store: "redis", Library: "bsm/redislock"},
		},
		Results: []compare.Result{
			{Backend: "redis", Store: "redis", Library: "distlock", Workload: "uncontended", Metrics: []compare.Metric{m(0.086, 0.062, 0.186, 0.086)}},
			{Backend: "redis: bsm/redislock", Store: "redis", Library: "bsm/redislock", Workload: "uncontended", Metrics: []compare.Metric{m(0.159, 0.052, 0.159, 0.177)}},
		},
	}
	if rows := rep.ratios(); len(rows) != 1 || rows[0].Cells[0].Text != "1.17×" {
		t.Errorf("ratios = %+v, want uncontended p50 1.17× (the median of 1.19, 1.17 and 0.49)", rows)
	}
}

// A ratio reads better or worse for distlock by which way the figure is
// better, and even within 10 %.
func TestVerdict(t *testing.T) {
	for _, tc := range []struct {
		r      float64
		higher bool
		want   string
	}{
		{0.5, false, "better"}, {2, false, "worse"}, {0.5, true, "worse"}, {2, true, "better"},
		{1.05, false, "even"}, {0.95, true, "even"}, {1.11, true, "better"}, {0.9, false, "better"},
	} {
		if got := verdict(tc.r, tc.higher); got != tc.want {
			t.Errorf("verdict(%v, higher %v) = %q, want %q", tc.r, tc.higher, got, tc.want)
		}
	}
}
