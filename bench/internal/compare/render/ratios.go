package render

import (
	"fmt"
	"github.com/distlock/distlock/bench/internal/compare"
	"io"
	"slices"
	"strings"
	"text/tabwriter"

	"github.com/distlock/distlock/bench/internal/measure"
)

// ratioColumn is one figure the report divides, distlock's over a peer's.
type ratioColumn struct {
	Workload, Metric, Head string
	// Higher says which way is better: true for rates.
	Higher bool
}

var ratioColumns = []ratioColumn{
	{"uncontended", "p50", "uncontended p50", false},
	{"contended", "acq/s", "contended acq/s", true},
	{"contended", "handoff p99", "contended hand-off p99", false},
	{"contended", "max share", "contended max share", false},
	{"many-keys", "acq/s", "many keys acq/s", true},
	{"crash-recovery", "recovery", "crash recovery", false},
}

// ratioRow is distlock against one peer library of its store, or against
// its fenced floor (the least lock of its kind with a fencing token,
// written in the benchmark), whose rows come first.
type ratioRow struct {
	Store, Peer string
	Version     string // the peer's, from the binary's build info
	Fenced      bool   // Peer is the store's fenced floor
	Cells       []ratioCell
}

// ratioCell is one ratio and how it reads.
type ratioCell struct {
	Text string // "1.23×", or "–" where either figure is missing
	// Verdict is "better" or "worse" for distlock when the ratio is off
	// 1 by more than evenBand, "even" within it, "" for no ratio.
	Verdict string
}

// evenBand is how far from 1 a ratio may be and still read "even": the
// noise of two libraries measured in the same rounds on a busy machine.
const evenBand = 1.10

// ratios divides each of distlock's figures by each peer's of the same
// store and run (see [pairedRatio]): below 1 is faster for times, above 1
// for rates.
func (rep *Report) ratios() []ratioRow {
	var rows []ratioRow
	for _, b := range rep.Backends {
		if b.Library == "distlock" || b.Floor {
			continue
		}
		row := ratioRow{Store: b.Store, Peer: b.Library, Version: b.Version, Fenced: b.Fenced}
		for _, c := range ratioColumns {
			row.Cells = append(row.Cells, rep.ratioCell(b.Store, b.Library, c))
		}
		rows = append(rows, row)
	}
	// A store's fenced floors first: the figure distlock is held to.
	slices.SortStableFunc(rows, func(a, b ratioRow) int {
		if a.Store != b.Store || a.Fenced == b.Fenced {
			return 0
		}
		if a.Fenced {
			return -1
		}
		return 1
	})
	return rows
}

func (rep *Report) ratioCell(store, peer string, c ratioColumn) ratioCell {
	mine, ok1 := rep.figure(store, "distlock", c)
	theirs, ok2 := rep.figure(store, peer, c)
	if !ok1 || !ok2 {
		return ratioCell{Text: "–"}
	}
	r, ok := pairedRatio(mine, theirs)
	if !ok {
		return ratioCell{Text: "–"}
	}
	return ratioCell{Text: fmt.Sprintf("%.2f×", r), Verdict: verdict(r, c.Higher)}
}

// verdict reads ratio r, distlock's over a peer's: "better" or "worse"
// for distlock beyond evenBand, else "even". higher: a rate, where above
// 1 is better; else a time or a share, where below 1 is.
func verdict(r float64, higher bool) string {
	switch {
	case r > evenBand:
		return map[bool]string{true: "better", false: "worse"}[higher]
	case r < 1/evenBand:
		return map[bool]string{true: "worse", false: "better"}[higher]
	}
	return "even"
}

// verdictMark is a verdict as the terminal table shows it.
var verdictMark = map[string]string{"better": " better", "worse": " worse", "even": ""}

// pairedRatio is mine over theirs: the median of the rounds' ratios, each
// round's figure over the peer's in the same round, when both have a
// positive figure for every one of the same rounds; else the ratio of the
// two medians. Rounds ran distlock and the peer in the same minute (the
// uncontended workload in turns within the round), so load that comes and
// goes between rounds divides out of each round's ratio; a ratio of
// medians can pair a fast round of one with a slow round of the other. ok
// is false when the peer's figure is not positive.
func pairedRatio(mine, theirs compare.Metric) (float64, bool) {
	if n := len(mine.Rounds); n > 1 && n == len(theirs.Rounds) {
		rs := make([]float64, 0, n)
		for i, v := range theirs.Rounds {
			if v <= 0 {
				break
			}
			rs = append(rs, mine.Rounds[i]/v)
		}
		if len(rs) == n {
			return measure.Median(rs), true
		}
	}
	if theirs.Value <= 0 {
		return 0, false
	}
	return mine.Value / theirs.Value, true
}

// figure returns library's figure of c on store.
func (rep *Report) figure(store, library string, c ratioColumn) (compare.Metric, bool) {
	for _, r := range rep.Results {
		if r.StoreName() == store && r.Library == library && !r.Floor && r.Workload == c.Workload {
			return r.Lookup(c.Metric)
		}
	}
	return compare.Metric{}, false
}

// ratioHeads are the columns' heads with which way is better.
func ratioHeads() []string {
	var heads []string
	for _, c := range ratioColumns {
		way := "lower is faster"
		if c.Higher {
			way = "higher is faster"
		}
		if c.Metric == "max share" {
			way = "lower is fairer"
		}
		heads = append(heads, fmt.Sprintf("%s (%s)", c.Head, way))
	}
	return heads
}

// writeRatios prints the ratios as a table (nothing without peers), each
// ratio off 1 by more than evenBand marked better or worse for distlock.
func (rep *Report) writeRatios(w io.Writer) error {
	rows := rep.ratios()
	if len(rows) == 0 {
		return nil
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintf(tw, "== verdict: distlock ÷ peer and ÷ fenced floor, same run (better/worse: by more than %.0f%%)\n", (evenBand-1)*100)
	fmt.Fprintln(tw, "store\tpeer\t"+strings.Join(ratioHeads(), "\t"))
	for _, r := range rows {
		peer := r.Peer
		if r.Version != "" {
			peer += " " + r.Version
		}
		cells := []string{r.Store, peer}
		for _, c := range r.Cells {
			cells = append(cells, c.Text+verdictMark[c.Verdict])
		}
		fmt.Fprintln(tw, strings.Join(cells, "\t"))
	}
	return tw.Flush()
}
