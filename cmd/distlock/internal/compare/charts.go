package compare

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/plotutil"
	"gonum.org/v1/plot/vg"

	"github.com/distlock/distlock/internal/measure"
)

// headline lists, per workload, the metrics its chart shows.
var headline = map[string][]string{
	"uncontended":    {"p50", "p99"},
	"contended":      {"acq/s"},
	"many-keys":      {"acq/s"},
	"crash-recovery": {"recovery"},
}

// chart is one rendered SVG.
type chart struct {
	Workload string
	File     string
	SVG      []byte
}

// writeCharts renders a grouped bar chart per workload: one group per
// backend, one bar per headline metric.
func (rep *Report) writeCharts(dir string) ([]chart, error) {
	var out []chart
	for _, wl := range rep.workloads() {
		rows := rep.byWorkload(wl)
		svg, err := barChart(wl, rows, headline[wl])
		if err != nil {
			return nil, fmt.Errorf("chart %s: %w", wl, err)
		}
		file := wl + ".svg"
		if err := os.WriteFile(filepath.Join(dir, file), svg, 0o644); err != nil {
			return nil, err
		}
		out = append(out, chart{Workload: wl, File: file, SVG: svg})
	}
	if svg, err := rep.handoffChart(); err == nil && svg != nil {
		if err := os.WriteFile(filepath.Join(dir, "handoff.svg"), svg, 0o644); err != nil {
			return nil, err
		}
		out = append(out, chart{Workload: "contended: hand-off latency by percentile", File: "handoff.svg", SVG: svg})
	}
	return out, nil
}

func barChart(title string, rows []Result, metrics []string) ([]byte, error) {
	p, err := barChartPlot(title, rows, metrics)
	if err != nil {
		return nil, err
	}
	return render(p, 6*vg.Inch, 3.5*vg.Inch)
}

func barChartPlot(title string, rows []Result, metrics []string) (*plot.Plot, error) {
	p := plot.New()
	p.Title.Text = title
	var names []string
	for _, r := range rows {
		names = append(names, r.Backend)
	}
	width := vg.Points(18)
	unit := ""
	for i, m := range metrics {
		vals := make(plotter.Values, len(rows))
		for j, r := range rows {
			v, _ := r.Metric(m)
			vals[j] = v
			for _, mm := range r.Metrics {
				if mm.Name == m {
					unit = mm.Unit
				}
			}
		}
		bars, err := plotter.NewBarChart(vals, width)
		if err != nil {
			return nil, err
		}
		bars.LineStyle.Width = 0
		bars.Color = plotutil.Color(i)
		bars.Offset = vg.Length(float64(i)-float64(len(metrics)-1)/2) * width
		p.Add(bars)
		p.Legend.Add(m, bars)
	}
	p.Y.Label.Text = unit
	p.Legend.Top = true
	p.NominalX(names...)
	return p, nil
}

// handoffChart plots each backend's hand-off latency percentiles.
func (rep *Report) handoffChart() ([]byte, error) {
	rows := rep.byWorkload("contended")
	if len(rows) == 0 {
		return nil, nil
	}
	p := plot.New()
	p.Title.Text = "hand-off latency (contended)"
	p.X.Label.Text = "percentile"
	p.Y.Label.Text = "ms"
	p.Y.Scale = plot.LogScale{}
	p.Y.Tick.Marker = plot.LogTicks{}
	for i, r := range rows {
		if len(r.Samples) == 0 {
			continue
		}
		pts := make(plotter.XYs, 0, 99)
		for q := 1; q <= 99; q++ {
			v := measure.PercentileSorted(r.Samples, float64(q)) // Samples are sorted
			pts = append(pts, plotter.XY{X: float64(q), Y: max(v, 0.001)})
		}
		line, err := plotter.NewLine(pts)
		if err != nil {
			return nil, err
		}
		line.Color = plotutil.Color(i)
		p.Add(line)
		p.Legend.Add(r.Backend, line)
	}
	p.Legend.Top = true
	p.Legend.Left = true
	return render(p, 6*vg.Inch, 3.5*vg.Inch)
}

func render(p *plot.Plot, w, h vg.Length) ([]byte, error) {
	wt, err := p.WriterTo(w, h, "svg")
	if err != nil {
		return nil, err
	}
	var buf bytes.Buffer
	if _, err := wt.WriteTo(&buf); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}
