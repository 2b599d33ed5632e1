package render

import (
	"bytes"
	"github.com/distlock/distlock/bench/internal/compare"
	"image/color"
	"math"
	"slices"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgsvg"

	"github.com/distlock/distlock/bench/internal/measure"
)

// peerColors are the peers' lines in a hand-off panel.
var peerColors = []color.Color{
	color.RGBA{R: 0xe0, G: 0x8a, B: 0x1e, A: 0xff},
	color.RGBA{R: 0x2a, G: 0x9d, B: 0x5c, A: 0xff},
	color.RGBA{R: 0xb8, G: 0x3b, B: 0x5e, A: 0xff},
}

// handoffChart draws, for each store, the hand-off latency by percentile
// of every library on it (contended workload), with the store's bare
// round trips dashed; all panels share the latency axis.
func (rep *Report) handoffChart() ([]byte, error) {
	rows := rep.byWorkload("contended")
	var stores []string
	lo, hi := math.Inf(1), math.Inf(-1)
	for _, r := range rows {
		if len(r.Samples) == 0 {
			continue
		}
		if !slices.Contains(stores, r.StoreName()) {
			stores = append(stores, r.StoreName())
		}
		lo = math.Min(lo, math.Max(measure.PercentileSorted(r.Samples, 1), 1e-4))
		hi = math.Max(hi, measure.PercentileSorted(r.Samples, 99))
	}
	if len(stores) == 0 {
		return nil, nil
	}
	lo = math.Pow(10, math.Floor(math.Log10(lo/1.2)))
	hi = math.Pow(10, math.Ceil(math.Log10(hi))) // the last tick: the legend goes above
	cols := min(len(stores), 3)
	nrows := (len(stores) + cols - 1) / cols
	plots := make([][]*plot.Plot, nrows)
	for i := range plots {
		plots[i] = make([]*plot.Plot, cols)
	}
	for i, s := range stores {
		p, err := handoffPanel(s, rows, lo, hi)
		if err != nil {
			return nil, err
		}
		plots[i/cols][i%cols] = p
	}
	w, h := 10*vg.Inch, vg.Length(nrows)*3*vg.Inch
	img := vgsvg.New(w, h)
	dc := draw.New(img)
	tiles := draw.Tiles{Rows: nrows, Cols: cols, PadX: vg.Points(14), PadY: vg.Points(14),
		PadTop: vg.Points(6), PadBottom: vg.Points(6), PadLeft: vg.Points(6), PadRight: vg.Points(10)}
	canvases := plot.Align(plots, tiles, dc)
	for j := range plots {
		for i, p := range plots[j] {
			if p != nil {
				p.Draw(canvases[j][i])
			}
		}
	}
	var buf bytes.Buffer
	if _, err := img.WriteTo(&buf); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

func handoffPanel(store string, rows []compare.Result, lo, hi float64) (*plot.Plot, error) {
	p := plot.New()
	styleAxes(p)
	p.Title.Text = store + ": hand-off (lower is better)" // longer titles overflow a panel
	p.Title.TextStyle.Font = sansFont(9.5)
	p.X.Label.Text = "percentile"
	p.Y.Label.Text = "release → next grant"
	p.X.Min, p.X.Max = 0, 100
	p.Y.Scale = plot.LogScale{}
	p.Y.Tick.Marker = logTicks{format: fmtMS, top: hi, fine: 1.5}
	p.Y.Min, p.Y.Max = lo, hi*math.Pow(hi/lo, 0.5)
	p.Legend.Top, p.Legend.Left = true, true
	p.Legend.YOffs = -vg.Points(2)
	p.Legend.Padding = vg.Points(1.5) // entries clear of each other
	grid := plotter.NewGrid()
	grid.Vertical.Color, grid.Horizontal.Color = faint, faint
	p.Add(grid)
	peer := 0
	for _, r := range rows {
		if r.StoreName() != store || len(r.Samples) == 0 {
			continue
		}
		pts := make(plotter.XYs, 0, 99)
		for q := 1; q <= 99; q++ {
			v := measure.PercentileSorted(r.Samples, float64(q)) // Samples are sorted
			pts = append(pts, plotter.XY{X: float64(q), Y: math.Max(v, lo)})
		}
		line, err := plotter.NewLine(pts)
		if err != nil {
			return nil, err
		}
		line.Width = vg.Points(1.6)
		switch rank(r) {
		case kindDistlock:
			line.Color = kindColor[kindDistlock]
		case kindFloor:
			line.Color = color.RGBA{R: 0x66, G: 0x66, B: 0x66, A: 0xff}
			line.Dashes = []vg.Length{vg.Points(3), vg.Points(2)}
			line.Width = vg.Points(1)
		default:
			line.Color = peerColors[peer%len(peerColors)]
			peer++
		}
		p.Add(line)
		p.Legend.Add(legendLabel(r), line)
	}
	return p, nil
}

func legendLabel(r compare.Result) string {
	switch {
	case r.Floor:
		return r.Library + " (floor)"
	case r.Library == "":
		return "distlock"
	}
	return r.Library
}
