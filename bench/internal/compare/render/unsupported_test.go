package render

import (
	"bytes"
	"regexp"
	"testing"

	"github.com/distlock/distlock/bench/internal/compare"
)

// A backend that cannot run a workload reads "unsupported" in the table
// and in the chart, beside the figures of one that can.
func TestUnsupportedRows(t *testing.T) {
	for _, tc := range []struct {
		workload, unsupported, chart string
		metrics                      []string
	}{
		{"semaphore", "the backend offers no semaphore", "unsupported (no semaphore)", []string{"acq/s", "wait p50", "wait p99", "max holders", "violations"}},
		{"rw", "the backend has no read-write lock", "no read-write lock", []string{"acq/s", "read acq/s", "write acq/s", "read wait p50", "write wait p99", "max readers", "violations"}},
	} {
		t.Run(tc.workload, func(t *testing.T) {
			ok := compare.Result{Backend: "mem", Workload: tc.workload, Store: "mem", Library: "distlock", Runs: 1}
			for _, m := range tc.metrics {
				ok.Metrics = append(ok.Metrics, compare.Metric{Name: m, Value: 1, Min: 1, Max: 1})
			}
			none := compare.Result{Backend: "none", Workload: tc.workload, Store: "none", Library: "distlock", Runs: 1, Unsupported: tc.unsupported}
			targets := []compare.Target{{Name: "mem", URL: "mem://a"}, {Name: "none", URL: "mem://b"}}
			rep := NewReport(targets, compare.Config{Workloads: []string{tc.workload}, Rounds: 1}, []compare.Result{ok, none}, Meta{})
			var table bytes.Buffer
			if err := rep.WriteTable(&table); err != nil {
				t.Fatal(err)
			}
			for _, want := range []string{`== ` + tc.workload, tc.metrics[len(tc.metrics)-2], `none\s+unsupported\s+-\s+-`} {
				if !regexp.MustCompile(want).MatchString(table.String()) {
					t.Errorf("table lacks %q:\n%s", want, table.String())
				}
			}
			if err := rep.WriteFiles(t.TempDir()); err != nil {
				t.Fatal(err)
			}
			svg, err := rep.workloadChart(tc.workload)
			if err != nil || !bytes.Contains(svg, []byte(tc.chart)) {
				t.Errorf("the %s chart does not show the unsupported row %q (err %v)", tc.workload, tc.chart, err)
			}
		})
	}
}
