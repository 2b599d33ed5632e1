package render

import (
	"cmp"
	"math"
	"strconv"
	"strings"

	"gonum.org/v1/plot"
)

// formatterFor returns how values of unit read in charts and labels:
// durations (unit "ms" or "s") with their own unit, rates as "2.98k/s",
// anything else with three significant digits.
func formatterFor(unit string) func(float64) string {
	switch unit {
	case "ms":
		return fmtMS
	case "s":
		return func(v float64) string { return fmtMS(v * 1000) }
	case "1/s":
		return fmtRate
	}
	return sig3
}

// fmtMS formats a duration given in milliseconds: "1.9µs", "418µs",
// "3.47ms", "3.00s".
func fmtMS(v float64) string {
	switch {
	case v <= 0:
		return "0"
	case v < 1e-3:
		return sig3(v*1e6) + "ns"
	case v < 1:
		return sig3(v*1e3) + "µs"
	case v < 1000:
		return sig3(v) + "ms"
	}
	return sig3(v/1000) + "s"
}

// fmtRate formats a rate per second: "244k/s", "2.98k/s", "357/s".
func fmtRate(v float64) string {
	switch {
	case v >= 1e6:
		return sig3(v/1e6) + "M/s"
	case v >= 1e3:
		return sig3(v/1e3) + "k/s"
	}
	return sig3(v) + "/s"
}

// sig3 formats v with three significant digits, without an exponent
// (whole numbers of four digits or more stay whole).
func sig3(v float64) string {
	if v == 0 || math.IsNaN(v) || math.IsInf(v, 0) {
		return strconv.FormatFloat(v, 'f', 0, 64)
	}
	decimals := max(0, 2-int(math.Floor(math.Log10(math.Abs(v)))))
	return strconv.FormatFloat(v, 'f', decimals, 64)
}

// logTicks marks a log axis: every power of ten labelled with format, and
// 2× and 5× it labelled too when the axis spans at most fine decades
// (default 3; else they are minor ticks). Above top (when not 0) there are
// none: that band holds a legend.
type logTicks struct {
	format func(float64) string
	top    float64
	fine   float64
}

func (t logTicks) Ticks(lo, hi float64) []plot.Tick {
	if t.top > 0 {
		hi = math.Min(hi, t.top)
	}
	if lo <= 0 || hi <= lo {
		return nil
	}
	fine := math.Log10(hi/lo) <= cmp.Or(t.fine, 3)
	var ticks []plot.Tick
	for e := math.Floor(math.Log10(lo)); e <= math.Ceil(math.Log10(hi)); e++ {
		base := math.Pow(10, e)
		for _, m := range []float64{1, 2, 5} {
			v := base * m
			if v < lo || v > hi {
				continue
			}
			tick := plot.Tick{Value: v}
			if m == 1 || fine {
				tick.Label = trimZeros(t.format(v))
			}
			ticks = append(ticks, tick)
		}
	}
	return ticks
}

// trimZeros drops the trailing zeros of a label's number: "2.00µs" →
// "2µs", "0.50ms" → "0.5ms".
func trimZeros(label string) string {
	end := strings.IndexFunc(label, func(r rune) bool { return (r < '0' || r > '9') && r != '.' })
	if end < 0 {
		end = len(label)
	}
	num, unit := label[:end], label[end:]
	if strings.Contains(num, ".") {
		num = strings.TrimRight(strings.TrimRight(num, "0"), ".")
	}
	return num + unit
}
