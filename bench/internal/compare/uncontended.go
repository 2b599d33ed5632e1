package compare

import (
	"context"
	"fmt"
	"math"
	"time"

	"github.com/distlock/distlock/bench/internal/measure"
)

// slicePairs is how many pairs a target times in one turn of the
// uncontended workload before the next target of its store takes over.
// The fewer, the closer the share of each target's pairs that a phase
// flip in mid-round catches: turns of 10 kept the per-round ratios of
// distlock to bsm/redislock steadier than turns of 25 on this machine
// (docs/benchmarks/2026-11-28-s11-interleaved.md).
const slicePairs = 10

// countPairs bounds the pairs of an uncontended counting pass.
const countPairs = 100

// uncontendedRound is one round of the uncontended workload on one
// store's targets (distlock, its peers, its floor), all with the same
// Config. Each target gets a client of its own, a key of its own and one
// warm-up pair (connections dialled, rows made); then the targets take
// turns, slicePairs pairs at a time, in an order rotated at every turn
// (by first + turn), until each has timed c.Iterations pairs or spent
// c.Duration*4 on them. A slow phase of the machine or of its loopback
// (a round trip twice as long for a second) so hits every target alike,
// where whole runs one after the other let one target land in it alone.
// The clients stay open through the turns and close at the end.
//
// What a pair costs, counted on the wire (round trips) and by the server
// (requests, fsyncs), cannot be told apart between targets that take
// turns: the counters are the store's, and other clients' background
// traffic would fall into a target's turns. So each target that has
// counters then runs a counting pass alone (see [countPass]), untimed.
//
// A target that fails stops with its error, and reports no figure, as a
// failed run did before; the others go on. The results are in ts' order.
func uncontendedRound(ctx context.Context, ts []Target, c Config, first int) []Result {
	runs := make([]*pairRun, len(ts))
	for i, t := range ts {
		runs[i] = startPairs(ctx, t, c)
	}
	defer func() {
		for _, p := range runs {
			p.close()
		}
	}()
	for turn := 0; ; turn++ { // bounded: a turn times a pair or ends a run
		var going []int
		for i, p := range runs {
			if !p.done {
				going = append(going, i)
			}
		}
		if len(going) == 0 {
			break
		}
		for _, i := range measure.Rotate(going, first+turn) {
			runs[i].turn(ctx, c)
		}
	}
	out := make([]Result, len(ts))
	for i, p := range runs {
		p.close()
		out[i] = p.result()
	}
	order := make([]int, len(ts))
	for i := range order {
		order[i] = i
	}
	for _, i := range measure.Rotate(order, first) {
		if out[i].Error == "" && (ts[i].Counters != nil || ts[i].RoundTrips != nil) {
			if err := countPass(ctx, ts[i], c, &out[i]); err != nil {
				out[i].Error = "counting pass: " + err.Error()
			}
		}
	}
	return out
}

// pairRun is one target's timed pairs in an uncontended round.
type pairRun struct {
	res   Result
	x     measure.Contender // nil once closed
	key   string
	lat   []time.Duration
	spent time.Duration // time spent in its turns
	done  bool
	err   error
}

// startPairs makes t's client and takes its warm-up pair.
func startPairs(ctx context.Context, t Target, c Config) *pairRun {
	p := &pairRun{res: newResult(t, "uncontended"), key: uniqueKey("uncontended")}
	x, err := t.client(ctx, c.TTL)
	if err != nil {
		p.fail(err)
		return p
	}
	p.x = x
	if _, err := measure.Pairs(ctx, x, p.key, 1, 0); err != nil {
		p.fail(fmt.Errorf("warm-up: %w", err))
	}
	return p
}

// turn times up to slicePairs more pairs.
func (p *pairRun) turn(ctx context.Context, c Config) {
	limit := c.Duration * 4
	n := min(slicePairs, c.Iterations-len(p.lat))
	start := c.now()
	ds, err := measure.PairsTimed(ctx, p.x, p.key, n, limit-p.spent, c.now)
	p.spent += c.now().Sub(start)
	p.lat = append(p.lat, ds...)
	switch {
	case err != nil:
		p.fail(err)
	case len(ds) < n || len(p.lat) >= c.Iterations || p.spent >= limit:
		p.done = true
	}
}

func (p *pairRun) fail(err error) {
	p.err, p.done = err, true
	p.close()
}

func (p *pairRun) close() {
	if p.x != nil {
		p.x.Close()
		p.x = nil
	}
}

// result returns the timed figures (only the error of a failed run).
func (p *pairRun) result() Result {
	r := p.res
	if p.err != nil {
		r.Error = p.err.Error()
		return r
	}
	s := measure.Summarize(p.lat)
	r.add("p50", "ms", ms(s.P50))
	r.add("p99", "ms", ms(s.P99))
	r.add("pairs/s", "1/s", float64(len(p.lat))/p.spent.Seconds())
	r.raw = p.lat
	return r
}

// countPass counts what an uncontended pair of t costs: a new client of
// t, alone (the round's clients are closed), takes one warm-up pair, then
// up to countPairs pairs (c.Iterations when fewer) that are not timed,
// with the round trips counted on the wire and the server's counters
// read before and after; r gets them per pair.
func countPass(ctx context.Context, t Target, c Config, r *Result) error {
	x, err := t.client(ctx, c.TTL)
	if err != nil {
		return err
	}
	closed := false
	defer func() {
		if !closed {
			x.Close()
		}
	}()
	key := uniqueKey("uncontended")
	if _, err := measure.Pairs(ctx, x, key, 1, 0); err != nil {
		return fmt.Errorf("warm-up: %w", err)
	}
	count := serverCount(ctx, t)
	var trips float64
	if t.RoundTrips != nil {
		trips = t.RoundTrips()
	}
	ds, err := measure.Pairs(ctx, x, key, min(c.Iterations, countPairs), c.Duration*4)
	if err != nil {
		return err
	}
	n := float64(len(ds))
	if t.RoundTrips != nil {
		r.add("round trips/pair", "", (t.RoundTrips()-trips)/n)
	}
	// The client ends before the server's counters are read: a server may
	// count a session's work only when it ends (PostgreSQL's statistics).
	x.Close()
	closed = true
	if requests, fsyncs, ok := count(); ok {
		r.add("requests/pair", "", requests/n)
		if !math.IsNaN(fsyncs) {
			r.add("fsyncs/pair", "", fsyncs/n)
		}
	}
	return nil
}

// serverCount starts counting the requests and fsyncs the target's server
// sees; the function it returns stops and returns the counts. Reading the
// counters is a request too: what one reading costs (two readings back to
// back) is taken off. Background traffic (other clients' pings, a lease's
// renewals) is counted in; a pass of 100 pairs makes it small. ok is false
// when the store has no counters or one reading failed.
func serverCount(ctx context.Context, t Target) func() (requests, fsyncs float64, ok bool) {
	none := func() (float64, float64, bool) { return 0, 0, false }
	if t.Counters == nil {
		return none
	}
	r0, _, err0 := t.Counters(ctx)
	r1, f1, err1 := t.Counters(ctx)
	if err0 != nil || err1 != nil {
		return none
	}
	return func() (float64, float64, bool) {
		r2, f2, err := t.Counters(ctx)
		if err != nil {
			return none()
		}
		return max(0, r2-r1-(r1-r0)), f2 - f1, true
	}
}
