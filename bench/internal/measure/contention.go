package measure

import (
	"slices"
	"time"
)

// Contention is the outcome of workers contending for one key (see
// [Contend]); [Contention.Merge] pools several runs.
type Contention struct {
	// Acquisitions is the number of grants.
	Acquisitions int
	// Duration is the run's length: from its start until every worker
	// stopped.
	Duration time.Duration
	// Handoffs are the gaps from a release's start to the next grant, one
	// per grant after the first (a gap that is not positive is left out).
	Handoffs []time.Duration
	// Releases are the release calls, start to return.
	Releases []time.Duration
	// Waits are each worker's waits, from asking to the grant; a wait the
	// run's end cut off counts with its length so far.
	Waits [][]time.Duration
	// Counts are each worker's grants.
	Counts []int
	// Overlaps counts grants made while another worker held the lock:
	// anything but 0 is a broken lock.
	Overlaps int64
	// Overtakes counts grants to a worker that asked after another worker
	// still waiting, by more than [OvertakeSlack]: 0 for a FIFO queue.
	Overtakes int
}

// OvertakeSlack is how much later than a waiter another worker must have
// asked for its grant to count as an overtake: asking times are taken
// before the request is sent, so closer calls are measurement noise.
const OvertakeSlack = time.Millisecond

// grant is one acquisition of a contended run, with its four instants.
type grant struct {
	asked, got, releasing, released time.Time
}

// fromGrants fills c's Acquisitions, Handoffs, Releases and Overtakes from
// the run's grants.
func (c *Contention) fromGrants(gs []grant) {
	slices.SortFunc(gs, func(a, b grant) int { return a.got.Compare(b.got) })
	c.Acquisitions = len(gs)
	for i, g := range gs {
		c.Releases = append(c.Releases, g.released.Sub(g.releasing))
		if i == 0 {
			continue
		}
		prev := gs[i-1]
		if h := g.got.Sub(prev.releasing); h > 0 {
			c.Handoffs = append(c.Handoffs, h)
		}
		// The earlier grant's worker asked later than this one, while this
		// one was already waiting.
		if g.asked.Before(prev.got) && prev.asked.Sub(g.asked) > OvertakeSlack {
			c.Overtakes++
		}
	}
}

// Merge pools o's samples into c, workers by index, and returns c; a nil
// c gives a copy of o.
func (c *Contention) Merge(o Contention) *Contention {
	if c == nil {
		cp := o
		cp.Waits = make([][]time.Duration, len(o.Waits))
		for i, w := range o.Waits {
			cp.Waits[i] = slices.Clone(w)
		}
		cp.Counts = slices.Clone(o.Counts)
		cp.Handoffs, cp.Releases = slices.Clone(o.Handoffs), slices.Clone(o.Releases)
		return &cp
	}
	c.Acquisitions += o.Acquisitions
	c.Duration += o.Duration
	c.Handoffs = append(c.Handoffs, o.Handoffs...)
	c.Releases = append(c.Releases, o.Releases...)
	for i := range min(len(c.Waits), len(o.Waits)) {
		c.Waits[i] = append(c.Waits[i], o.Waits[i]...)
		c.Counts[i] += o.Counts[i]
	}
	c.Overlaps += o.Overlaps
	c.Overtakes += o.Overtakes
	return c
}

// Rate returns the grants per second over the run.
func (c *Contention) Rate() float64 {
	if c.Duration <= 0 {
		return 0
	}
	return float64(c.Acquisitions) / c.Duration.Seconds()
}

// AllWaits returns every worker's waits in one slice.
func (c *Contention) AllWaits() []time.Duration { return slices.Concat(c.Waits...) }

// Shares returns each worker's share of the grants, as a fraction (they
// add up to 1 when there was any grant).
func (c *Contention) Shares() []float64 {
	shares := make([]float64, len(c.Counts))
	for i, n := range c.Counts {
		shares[i] = float64(n) / float64(max(1, c.Acquisitions))
	}
	return shares
}

// MaxShare returns the busiest worker's share of the grants relative to a
// fair share: 1 when every worker got as many, the number of workers when
// one got them all.
func (c *Contention) MaxShare() float64 {
	if len(c.Counts) == 0 {
		return 0
	}
	return float64(slices.Max(c.Counts)) * float64(len(c.Counts)) / float64(max(1, c.Acquisitions))
}
