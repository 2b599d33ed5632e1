package compare

import (
	"encoding/csv"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"
)

// Report is everything a run produced, with where and when it ran.
type Report struct {
	Created  time.Time         `json:"created"`
	Machine  map[string]string `json:"machine"`
	Config   ConfigSummary     `json:"config"`
	Backends []BackendInfo     `json:"backends"`
	Results  []Result          `json:"results"`
}

// ConfigSummary records the workload sizes of a run.
type ConfigSummary struct {
	Iterations int    `json:"iterations"`
	Workers    int    `json:"workers"`
	Duration   string `json:"duration"`
	TTL        string `json:"ttl"`
}

// BackendInfo describes one target in a report.
type BackendInfo struct {
	Name string `json:"name"`
	URL  string `json:"url"` // without password
}

// NewReport assembles a report.
func NewReport(targets []Target, c Config, results []Result, machine map[string]string) *Report {
	c = c.withDefaults()
	rep := &Report{Created: time.Now().UTC(), Machine: machine, Results: results,
		Config: ConfigSummary{Iterations: c.Iterations, Workers: c.Workers, Duration: c.Duration.String(), TTL: c.TTL.String()}}
	for _, t := range targets {
		rep.Backends = append(rep.Backends, BackendInfo{Name: t.Name, URL: t.Display()})
	}
	return rep
}

// WriteTable prints one block per workload: a row per backend, a column
// per metric.
func (rep *Report) WriteTable(w io.Writer) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	for _, wl := range rep.workloads() {
		rows := rep.byWorkload(wl)
		fmt.Fprintf(tw, "\n== %s\n", wl)
		header := []string{"backend"}
		for _, m := range firstMetrics(rows) {
			header = append(header, strings.TrimSpace(m.Name+" "+unitLabel(m.Unit)))
		}
		fmt.Fprintln(tw, strings.Join(header, "\t"))
		for _, r := range rows {
			cells := []string{r.Backend}
			if r.Error != "" && len(r.Metrics) == 0 {
				cells = append(cells, "error: "+r.Error)
			}
			for _, m := range r.Metrics {
				cells = append(cells, formatValue(m.Value))
			}
			fmt.Fprintln(tw, strings.Join(cells, "\t"))
		}
	}
	return tw.Flush()
}

func unitLabel(u string) string {
	if u == "" {
		return ""
	}
	return "(" + u + ")"
}

func formatValue(v float64) string {
	switch {
	case v == float64(int64(v)) && v < 1e6:
		return strconv.FormatInt(int64(v), 10)
	case v >= 100:
		return strconv.FormatFloat(v, 'f', 0, 64)
	case v >= 1:
		return strconv.FormatFloat(v, 'f', 2, 64)
	default:
		return strconv.FormatFloat(v, 'f', 3, 64)
	}
}

func firstMetrics(rows []Result) []Metric {
	for _, r := range rows {
		if len(r.Metrics) > 0 {
			return r.Metrics
		}
	}
	return nil
}

func (rep *Report) workloads() []string {
	var out []string
	seen := map[string]bool{}
	for _, r := range rep.Results {
		if !seen[r.Workload] {
			seen[r.Workload] = true
			out = append(out, r.Workload)
		}
	}
	return out
}

func (rep *Report) byWorkload(w string) []Result {
	var out []Result
	for _, r := range rep.Results {
		if r.Workload == w {
			out = append(out, r)
		}
	}
	return out
}

// WriteFiles writes report.json, results.csv, one SVG chart per workload
// and report.html into dir, creating it.
func (rep *Report) WriteFiles(dir string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	js, err := json.MarshalIndent(rep, "", "  ")
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(dir, "report.json"), js, 0o644); err != nil {
		return err
	}
	if err := rep.writeCSV(filepath.Join(dir, "results.csv")); err != nil {
		return err
	}
	charts, err := rep.writeCharts(dir)
	if err != nil {
		return err
	}
	return rep.writeHTML(filepath.Join(dir, "report.html"), charts)
}

func (rep *Report) writeCSV(path string) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	w := csv.NewWriter(f)
	_ = w.Write([]string{"backend", "workload", "metric", "unit", "value", "error"})
	for _, r := range rep.Results {
		if len(r.Metrics) == 0 {
			_ = w.Write([]string{r.Backend, r.Workload, "", "", "", r.Error})
		}
		for _, m := range r.Metrics {
			_ = w.Write([]string{r.Backend, r.Workload, m.Name, m.Unit, strconv.FormatFloat(m.Value, 'g', 6, 64), r.Error})
		}
	}
	w.Flush()
	if err := w.Error(); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}
