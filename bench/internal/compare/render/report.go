package render

import (
	"encoding/csv"
	"encoding/json"
	"fmt"
	"github.com/distlock/distlock/bench/internal/compare"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"
)

// Report is everything a run produced, with where and when it ran.
type Report struct {
	Created time.Time         `json:"created"`
	Machine map[string]string `json:"machine"`
	// Command is the command line that made the report, passwords
	// redacted.
	Command  string           `json:"command,omitempty"`
	Config   ConfigSummary    `json:"config"`
	Stores   []StoreInfo      `json:"stores,omitempty"`
	Backends []BackendInfo    `json:"backends"`
	Results  []compare.Result `json:"results"`
}

// ConfigSummary records the workload sizes of a run.
type ConfigSummary struct {
	Iterations int    `json:"iterations"`
	Workers    int    `json:"workers"`
	Duration   string `json:"duration"`
	TTL        string `json:"ttl"`
	Rounds     int    `json:"rounds"`
	// Permits and SemaphoreWorkers size the semaphore workload.
	Permits          int    `json:"permits,omitempty"`
	SemaphoreWorkers int    `json:"semaphore_workers,omitempty"`
	SemaphoreHold    string `json:"semaphore_hold,omitempty"`
	// RWWorkers, RWReads (percent) and RWHold size the rw workload.
	RWWorkers int    `json:"rw_workers,omitempty"`
	RWReads   int    `json:"rw_reads,omitempty"`
	RWHold    string `json:"rw_hold,omitempty"`
}

// StoreInfo describes one store of a run: its server, as the server
// reports itself, and its bare round trip.
type StoreInfo struct {
	Name     string   `json:"name"`
	URL      string   `json:"url"` // without password
	Server   string   `json:"server,omitempty"`
	Settings []string `json:"settings,omitempty"`
	// Floor names the store's bare round trip ("PING"), if measured.
	Floor string `json:"floor,omitempty"`
	// Note says what is missing and why (no peers, no server version).
	Note string `json:"note,omitempty"`
}

// BackendInfo describes one target in a report.
type BackendInfo struct {
	Name    string `json:"name"`
	URL     string `json:"url"` // without password
	Store   string `json:"store"`
	Library string `json:"library"`
	Floor   bool   `json:"floor,omitempty"`
	// Fenced marks a fenced floor (compare.Target.Fenced).
	Fenced bool   `json:"fenced_floor,omitempty"`
	About  string `json:"about,omitempty"`
	// Version is the library's version from the binary's build info.
	Version string `json:"version,omitempty"`
	// Conns is how many of the store's connections a held lease keeps.
	Conns string `json:"conns_per_lease,omitempty"`
}

// Meta is what a report says about its run besides the results.
type Meta struct {
	Machine map[string]string
	Command string
	Stores  []StoreInfo
}

// NewReport assembles a report.
func NewReport(targets []compare.Target, c compare.Config, results []compare.Result, meta Meta) *Report {
	c = c.WithDefaults()
	rep := &Report{Created: time.Now().UTC(), Machine: meta.Machine, Command: meta.Command, Stores: meta.Stores, Results: results,
		Config: ConfigSummary{Iterations: c.Iterations, Workers: c.Workers, Duration: c.Duration.String(), TTL: c.TTL.String(), Rounds: c.Rounds,
			Permits: c.Permits, SemaphoreWorkers: c.SemaphoreWorkers, SemaphoreHold: c.SemaphoreHold.String(),
			RWWorkers: c.RWWorkers, RWReads: c.RWReads, RWHold: c.RWHold.String()}}
	for _, t := range targets {
		rep.Backends = append(rep.Backends, BackendInfo{Name: t.Name, URL: t.Display(), Store: t.StoreName(),
			Library: t.LibraryName(), Floor: t.Floor, Fenced: t.Fenced, About: t.About, Version: t.Version, Conns: t.Conns})
	}
	return rep
}

// WriteTable prints the verdict (distlock ÷ each peer) first, then one
// block per workload: a row per target, a column per metric (the median
// of the rounds).
func (rep *Report) WriteTable(w io.Writer) error {
	if err := rep.writeRatios(w); err != nil {
		return err
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	if rep.Config.Rounds > 1 {
		fmt.Fprintf(tw, "(median of %d rounds)\n", rep.Config.Rounds)
	}
	for _, wl := range rep.workloads() {
		rows := rep.byWorkload(wl)
		fmt.Fprintf(tw, "\n== %s\n", wl)
		header := []string{"backend"}
		cols := compare.AllMetrics(rows)
		for _, m := range cols {
			header = append(header, strings.TrimSpace(m.Name+" "+unitLabel(m.Unit)))
		}
		fmt.Fprintln(tw, strings.Join(header, "\t"))
		for _, r := range rows {
			cells := []string{r.Backend}
			switch {
			case r.Unsupported != "" && len(r.Metrics) == 0:
				// A cell per column, so that the next rows stay aligned;
				// the reason is in report.json and the HTML.
				cells = append(cells, "unsupported")
				for range len(cols) - 1 {
					cells = append(cells, "-")
				}
			case r.Error != "" && len(r.Metrics) == 0:
				cells = append(cells, "error: "+r.Error)
			}
			for _, c := range cols {
				if m, ok := r.Lookup(c.Name); ok {
					cells = append(cells, formatValue(m.Value))
				} else if len(r.Metrics) > 0 {
					cells = append(cells, "-")
				}
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

// allMetrics returns every metric some row has, in the order they first
// appear (a store without server counters lacks some).
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

// byWorkload returns workload w's results, a store's together (in the
// order the stores first appear), distlock first and the floor last.
func (rep *Report) byWorkload(w string) []compare.Result {
	var stores []string
	for _, r := range rep.Results {
		if r.Workload == w && !slices.Contains(stores, r.StoreName()) {
			stores = append(stores, r.StoreName())
		}
	}
	var out []compare.Result
	for _, s := range stores {
		for pass := range 3 {
			for _, r := range rep.Results {
				if r.Workload == w && r.StoreName() == s && rank(r) == pass {
					out = append(out, r)
				}
			}
		}
	}
	return out
}

// rank orders a store's rows: distlock, peers, floor.
func rank(r compare.Result) int {
	switch {
	case r.Floor:
		return 2
	case r.Library != "" && r.Library != "distlock":
		return 1
	}
	return 0
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

// writeCSV writes a row per metric: the median over the rounds as value,
// then (after the columns of reports before rounds) min, max, store and
// library.
func (rep *Report) writeCSV(path string) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	w := csv.NewWriter(f)
	_ = w.Write([]string{"backend", "workload", "metric", "unit", "value", "error", "min", "max", "store", "library"})
	g := func(v float64) string { return strconv.FormatFloat(v, 'g', 6, 64) }
	for _, r := range rep.Results {
		if len(r.Metrics) == 0 {
			e := r.Error
			if r.Unsupported != "" {
				e = "unsupported: " + r.Unsupported
			}
			_ = w.Write([]string{r.Backend, r.Workload, "", "", "", e, "", "", r.StoreName(), r.Library})
		}
		for _, m := range r.Metrics {
			_ = w.Write([]string{r.Backend, r.Workload, m.Name, m.Unit, g(m.Value), r.Error, g(m.Min), g(m.Max), r.StoreName(), r.Library})
		}
	}
	w.Flush()
	if err := w.Error(); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}
