package render

import (
	"fmt"
	"github.com/distlock/distlock/bench/internal/compare"
	"io"
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

// ratioRow is distlock against one peer library of its store.
type ratioRow struct {
	Store, Peer string
	Cells       []string // "1.23×", or "–" where either figure is missing
}

// ratios divides each of distlock's figures by each peer's of the same
// store and run (see [pairedRatio]): below 1 is faster for times, above 1
// for rates.
func (rep *Report) ratios() []ratioRow {
	var rows []ratioRow
	for _, b := range rep.Backends {
		if b.Library == "distlock" || b.Floor {
			continue
		}
		row := ratioRow{Store: b.Store, Peer: b.Library}
		for _, c := range ratioColumns {
			row.Cells = append(row.Cells, rep.ratioCell(b.Store, b.Library, c))
		}
		rows = append(rows, row)
	}
	return rows
}

func (rep *Report) ratioCell(store, peer string, c ratioColumn) string {
	mine, ok1 := rep.figure(store, "distlock", c)
	theirs, ok2 := rep.figure(store, peer, c)
	if !ok1 || !ok2 {
		return "–"
	}
	r, ok := pairedRatio(mine, theirs)
	if !ok {
		return "–"
	}
	return fmt.Sprintf("%.2f×", r)
}

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

// writeRatios prints the ratios as a table (nothing without peers).
func (rep *Report) writeRatios(w io.Writer) error {
	rows := rep.ratios()
	if len(rows) == 0 {
		return nil
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintf(tw, "\n== distlock ÷ peer, same run\n")
	fmt.Fprintln(tw, "store\tpeer\t"+strings.Join(ratioHeads(), "\t"))
	for _, r := range rows {
		fmt.Fprintln(tw, r.Store+"\t"+r.Peer+"\t"+strings.Join(r.Cells, "\t"))
	}
	return tw.Flush()
}
