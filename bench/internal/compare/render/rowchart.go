package render

import (
	"image/color"
	"math"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/font"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
)

// Row kinds, each drawn in its own colour.
const (
	kindDistlock = iota
	kindPeer
	kindFloor
)

var (
	kindColor = [...]color.Color{
		kindDistlock: color.RGBA{R: 0x1f, G: 0x5f, B: 0xae, A: 0xff},
		kindPeer:     color.RGBA{R: 0xe0, G: 0x8a, B: 0x1e, A: 0xff},
		kindFloor:    color.RGBA{R: 0xbb, G: 0xbb, B: 0xbb, A: 0xff},
	}
	kindName = [...]string{kindDistlock: "distlock", kindPeer: "peer library", kindFloor: "bare round trip (floor)"}
	ink      = color.RGBA{R: 0x22, G: 0x22, B: 0x22, A: 0xff}
	faint    = color.RGBA{R: 0xdd, G: 0xdd, B: 0xdd, A: 0xff}
)

// row is one bar of a rowChart.
type row struct {
	value  float64 // the bar: the median round's value (0: no value)
	lo, hi float64 // the rounds' min and max: a whisker
	mark   float64 // a second figure drawn as a triangle (0: none)
	text   string  // the value label
	kind   int
	group  int // the store's index: rows of one group sit together
}

// ref is a dashed vertical reference line over rows first..last.
type ref struct {
	x           float64
	first, last int
	text        string // drawn at the top of the line when not empty
}

// rowChart is a horizontal bar chart for a log axis: one bar per row from
// the axis' left end to its value, a whisker over the rounds' min–max, an
// optional triangle, a value label, and dashed reference lines. The top
// band above the rows holds a legend.
type rowChart struct {
	rows   []row
	refs   []ref
	legend []legendItem
	// room is the share of the axis kept free right of the largest value,
	// for its label.
	room float64
}

type legendItem struct {
	text   string
	color  color.Color
	dashed bool // a dashed line instead of a swatch
	mark   bool // a triangle instead of a swatch
}

// y returns the data y of row i: the first row on top.
func (rc *rowChart) y(i int) float64 { return float64(len(rc.rows) - 1 - i) }

// DataRange implements plot.DataRanger: the values with room on the right
// for labels, at least a decade wide.
func (rc *rowChart) DataRange() (xmin, xmax, ymin, ymax float64) {
	lo, hi := math.Inf(1), math.Inf(-1)
	see := func(v float64) {
		if v > 0 {
			lo, hi = math.Min(lo, v), math.Max(hi, v)
		}
	}
	for _, r := range rc.rows {
		see(r.value)
		see(r.lo)
		see(r.hi)
		see(r.mark)
	}
	for _, f := range rc.refs {
		see(f.x)
	}
	if math.IsInf(lo, 0) {
		lo, hi = 0.1, 1
	}
	if hi/lo < 10 {
		mid := math.Sqrt(lo * hi)
		lo, hi = mid/math.Sqrt(10), mid*math.Sqrt(10)
	}
	lo /= 1.5
	hi *= math.Pow(hi/lo, rc.room/(1-rc.room))
	return lo, hi, -0.6, float64(len(rc.rows)) + 0.5
}

// Plot implements plot.Plotter.
func (rc *rowChart) Plot(c draw.Canvas, p *plot.Plot) {
	trX, trY := p.Transforms(&c)
	h := (trY(1) - trY(0)) * 0.62
	rc.drawGrid(c, p, trX, trY(-0.6), trY(float64(len(rc.rows))-0.5))
	rc.drawSeparators(c, trY)
	for _, f := range rc.refs {
		rc.drawRef(c, f, trX, trY)
	}
	for i, r := range rc.rows {
		rc.drawRow(c, r, trX, trY(rc.y(i)), h)
	}
	rc.drawLegend(c, trY(float64(len(rc.rows))-0.15))
}

// drawGrid draws a vertical line at each labelled tick, over the rows
// only (not the legend band).
func (rc *rowChart) drawGrid(c draw.Canvas, p *plot.Plot, trX func(float64) vg.Length, bottom, top vg.Length) {
	for _, tk := range p.X.Tick.Marker.Ticks(p.X.Min, p.X.Max) {
		if !tk.IsMinor() {
			x := trX(tk.Value)
			c.StrokeLine2(draw.LineStyle{Color: faint, Width: vg.Points(0.6)}, x, bottom, x, top)
		}
	}
}

func (rc *rowChart) drawSeparators(c draw.Canvas, trY func(float64) vg.Length) {
	for i := 1; i < len(rc.rows); i++ {
		if rc.rows[i].group != rc.rows[i-1].group {
			y := trY(rc.y(i) + 0.5)
			c.StrokeLine2(draw.LineStyle{Color: faint, Width: vg.Points(0.8)}, c.Min.X, y, c.Max.X, y)
		}
	}
}

func (rc *rowChart) drawRef(c draw.Canvas, f ref, trX, trY func(float64) vg.Length) {
	x := trX(f.x)
	top, bottom := trY(rc.y(f.first)+0.45), trY(rc.y(f.last)-0.45)
	style := draw.LineStyle{Color: color.RGBA{R: 0x66, G: 0x66, B: 0x66, A: 0xff}, Width: vg.Points(1),
		Dashes: []vg.Length{vg.Points(3), vg.Points(2)}}
	c.StrokeLine2(style, x, bottom, x, top)
	if f.text != "" {
		ts := textStyle(8, ink)
		ts.XAlign, ts.YAlign = draw.XCenter, draw.YBottom
		c.FillText(ts, vg.Point{X: x, Y: top + vg.Points(1)}, f.text)
	}
}

func (rc *rowChart) drawRow(c draw.Canvas, r row, trX func(float64) vg.Length, y, h vg.Length) {
	if r.value <= 0 {
		ts := textStyle(8, ink)
		ts.YAlign = draw.YCenter
		c.FillText(ts, vg.Point{X: c.Min.X + vg.Points(4), Y: y}, r.text)
		return
	}
	x1 := trX(r.value)
	bar := []vg.Point{{X: c.Min.X, Y: y - h/2}, {X: x1, Y: y - h/2}, {X: x1, Y: y + h/2}, {X: c.Min.X, Y: y + h/2}}
	c.FillPolygon(kindColor[r.kind], c.ClipPolygonXY(bar))
	right := x1
	if r.lo > 0 && r.hi > r.lo {
		ws := draw.LineStyle{Color: ink, Width: vg.Points(1)}
		xl, xh := trX(r.lo), trX(r.hi)
		c.StrokeLine2(ws, xl, y, xh, y)
		c.StrokeLine2(ws, xl, y-h/4, xl, y+h/4)
		c.StrokeLine2(ws, xh, y-h/4, xh, y+h/4)
		right = max(right, xh)
	}
	if r.mark > 0 {
		xm := trX(r.mark)
		c.DrawGlyph(draw.GlyphStyle{Color: ink, Radius: h / 3, Shape: draw.PyramidGlyph{}}, vg.Point{X: xm, Y: y})
		right = max(right, xm+h/3)
	}
	ts := textStyle(8.5, ink)
	ts.YAlign = draw.YCenter
	if w := ts.Width(r.text); right+vg.Points(4)+w > c.Max.X && x1-c.Min.X > w+vg.Points(8) {
		ts.Color, ts.XAlign = color.White, draw.XRight // no room on the right: inside the bar
		c.FillText(ts, vg.Point{X: x1 - vg.Points(4), Y: y}, r.text)
		return
	}
	c.FillText(ts, vg.Point{X: right + vg.Points(4), Y: y}, r.text)
}

func (rc *rowChart) drawLegend(c draw.Canvas, y vg.Length) {
	ts := textStyle(8.5, ink)
	ts.YAlign = draw.YCenter
	x := c.Min.X + vg.Points(4)
	for _, it := range rc.legend {
		switch {
		case it.dashed:
			c.StrokeLine2(draw.LineStyle{Color: it.color, Width: vg.Points(1), Dashes: []vg.Length{vg.Points(3), vg.Points(2)}},
				x+vg.Points(4), y-vg.Points(5), x+vg.Points(4), y+vg.Points(5))
		case it.mark:
			c.DrawGlyphNoClip(draw.GlyphStyle{Color: it.color, Radius: vg.Points(3.5), Shape: draw.PyramidGlyph{}}, vg.Point{X: x + vg.Points(4), Y: y})
		default:
			sq := []vg.Point{{X: x, Y: y - vg.Points(4)}, {X: x + vg.Points(8), Y: y - vg.Points(4)},
				{X: x + vg.Points(8), Y: y + vg.Points(4)}, {X: x, Y: y + vg.Points(4)}}
			c.FillPolygon(it.color, sq)
		}
		x += vg.Points(11)
		c.FillText(ts, vg.Point{X: x, Y: y}, it.text)
		x += ts.Width(it.text) + vg.Points(12)
	}
}

// textStyle is the charts' sans-serif text of size pt.
func textStyle(pt float64, col color.Color) draw.TextStyle {
	return draw.TextStyle{Color: col, Font: sansFont(pt), Handler: plot.DefaultTextHandler}
}

func sansFont(pt float64) font.Font {
	return font.Font{Typeface: "Liberation", Variant: "Sans", Size: vg.Points(pt)}
}
