package render

import (
	"bytes"
	"cmp"
	"fmt"
	"github.com/distlock/distlock/bench/internal/compare"
	"os"
	"path/filepath"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgsvg"
)

// chartSpec says what a workload's chart shows.
type chartSpec struct {
	room   float64 // share of the axis right of the largest value, for its label
	metric string  // the bar
	mark   string  // drawn as a triangle on the bar, when not empty
	title  string
	axis   string
	ttlRef bool // a reference line at the TTL; else the floors' lines
}

var charts = map[string]chartSpec{
	"uncontended": {room: 0.42, metric: "p50", mark: "p99", title: "uncontended: time per acquire + release (lower is better)",
		axis: "p50 bar, p99 triangle, whisker = min–max of the rounds' p50 (log scale)"},
	"contended": {metric: "acq/s", title: "contended: acquisitions per second on one key (higher is better)",
		axis: "grants per second, all clients together (log scale)"},
	"many-keys": {metric: "acq/s", title: "many keys: acquisitions per second, a key per client (higher is better)",
		axis: "grants per second, all clients together (log scale)"},
	"semaphore": {metric: "acq/s", title: "semaphore: acquisitions per second, one permit at a time (higher is better)",
		axis: "grants per second, all clients together (log scale)"},
	"rw": {metric: "acq/s", title: "read-write lock: reads and writes per second (higher is better)",
		axis: "grants per second, all clients together (log scale)"},
	"crash-recovery": {metric: "recovery", title: "crash recovery: holder killed → next grant (lower is better)",
		axis: "time from the holder's death to the waiter's grant (log scale)", ttlRef: true},
}

// unsupportedWhat names, per workload, what a backend that cannot run it
// lacks.
var unsupportedWhat = map[string]string{"semaphore": "no semaphore", "rw": "no read-write lock"}

// chart is one rendered SVG.
type chart struct {
	Workload string
	File     string
	SVG      []byte
}

// writeCharts renders a chart per workload, and the hand-off panels.
func (rep *Report) writeCharts(dir string) ([]chart, error) {
	var out []chart
	for _, wl := range rep.workloads() {
		svg, err := rep.workloadChart(wl)
		if err != nil {
			return nil, fmt.Errorf("chart %s: %w", wl, err)
		}
		out = append(out, chart{Workload: wl, File: wl + ".svg", SVG: svg})
	}
	if svg, err := rep.handoffChart(); err != nil {
		return nil, fmt.Errorf("chart handoff: %w", err)
	} else if svg != nil {
		out = append(out, chart{Workload: "handoff", File: "handoff.svg", SVG: svg})
	}
	for _, c := range out {
		if err := os.WriteFile(filepath.Join(dir, c.File), c.SVG, 0o644); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// workloadChart draws one row per result of workload wl.
func (rep *Report) workloadChart(wl string) ([]byte, error) {
	spec := charts[wl]
	results := rep.byWorkload(wl)
	rc := &rowChart{room: cmp.Or(spec.room, 0.2)}
	var labels []string
	unit := ""
	groups := map[string]int{}
	for _, r := range results {
		g, ok := groups[r.StoreName()]
		if !ok {
			g = len(groups)
			groups[r.StoreName()] = g
		}
		m, _ := r.Lookup(spec.metric)
		if m.Unit != "" {
			unit = m.Unit
		}
		rw := row{value: m.Value, lo: m.Min, hi: m.Max, group: g, kind: rank(r), text: "no result"}
		switch {
		case r.Unsupported != "" && len(r.Metrics) == 0:
			rw.text = "unsupported (" + unsupportedWhat[wl] + ")"
		case r.Error != "" && len(r.Metrics) == 0:
			rw.text = "failed (see the table)"
		}
		labels = append(labels, rowLabel(r))
		rc.rows = append(rc.rows, rw)
	}
	format := formatterFor(unit)
	for i, r := range results {
		rw := &rc.rows[i]
		if rw.value <= 0 {
			continue
		}
		rw.text = format(rw.value)
		if spec.mark != "" {
			if v, ok := r.Metric(spec.mark); ok && v > 0 {
				rw.mark = v
				rw.text += "  (" + spec.mark + " " + format(v) + ")"
			}
		}
	}
	rc.refs, rc.legend = rep.refs(spec, results, rc), legendFor(spec, results)
	return renderRows(spec, rc, labels, format)
}

// rowLabel names a row: "redis: distlock", "redis: PING (floor)".
func rowLabel(r compare.Result) string {
	lib := r.Library
	if lib == "" {
		lib = "distlock"
	}
	if r.Floor {
		lib += " (floor)"
	}
	return r.StoreName() + ": " + lib
}

// refs returns the reference lines: the TTL over every row, or each
// store's floor over its rows.
func (rep *Report) refs(spec chartSpec, results []compare.Result, rc *rowChart) []ref {
	if spec.ttlRef {
		if len(results) == 0 {
			return nil
		}
		ttl, _ := results[0].Metric("ttl")
		return []ref{{x: ttl, first: 0, last: len(results) - 1, text: "TTL " + fmtMS(ttl*1000)}}
	}
	var out []ref
	for i, r := range results {
		if !r.Floor || rc.rows[i].value <= 0 {
			continue
		}
		first := i
		for first > 0 && rc.rows[first-1].group == rc.rows[i].group {
			first--
		}
		out = append(out, ref{x: rc.rows[i].value, first: first, last: i})
	}
	return out
}

func legendFor(spec chartSpec, results []compare.Result) []legendItem {
	seen := map[int]bool{}
	for _, r := range results {
		seen[rank(r)] = true
	}
	var out []legendItem
	for k := range kindName {
		if seen[k] {
			out = append(out, legendItem{text: kindName[k], color: kindColor[k]})
		}
	}
	if spec.mark != "" {
		out = append(out, legendItem{text: spec.mark, color: ink, mark: true})
	}
	if seen[kindFloor] && !spec.ttlRef {
		out = append(out, legendItem{text: "floor of the store", color: ink, dashed: true})
	}
	return out
}

func renderRows(spec chartSpec, rc *rowChart, labels []string, format func(float64) string) ([]byte, error) {
	p := plot.New()
	styleAxes(p)
	p.Title.Text = spec.title
	p.X.Label.Text = spec.axis
	p.X.Scale = plot.LogScale{}
	p.X.Tick.Marker = logTicks{format: format}
	ticks := make(plot.ConstantTicks, len(labels))
	for i, l := range labels {
		ticks[i] = plot.Tick{Value: rc.y(i), Label: l}
	}
	p.Y.Tick.Marker = ticks
	p.Y.Tick.Length = 0
	p.Y.LineStyle.Width = 0
	p.Add(rc)
	h := 1.3*vg.Inch + vg.Length(len(labels))*0.27*vg.Inch
	return render(p, 7*vg.Inch, h)
}

// styleAxes sets the plot's text in sans-serif.
func styleAxes(p *plot.Plot) {
	p.Title.TextStyle.Font = sansFont(11)
	p.Title.Padding = vg.Points(6)
	for _, a := range []*plot.Axis{&p.X, &p.Y} {
		a.Label.TextStyle.Font = sansFont(9)
		a.Tick.Label.Font = sansFont(8.5)
	}
	p.Legend.TextStyle.Font = sansFont(8.5)
}

// render draws p as an SVG of w × h with a margin.
func render(p *plot.Plot, w, h vg.Length) ([]byte, error) {
	img := vgsvg.New(w, h)
	m := vg.Points(6)
	p.Draw(draw.Crop(draw.New(img), m, -m, m/2, -m/2))
	var buf bytes.Buffer
	if _, err := img.WriteTo(&buf); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}
