package measure

import (
	"math"
	"slices"
	"testing"
	"time"
)

func TestShares(t *testing.T) {
	c := Contention{Acquisitions: 8, Counts: []int{2, 2, 4, 0}, Duration: 2 * time.Second}
	if got := c.Shares(); !slices.Equal(got, []float64{0.25, 0.25, 0.5, 0}) {
		t.Errorf("Shares = %v", got)
	}
	if got := c.MaxShare(); got != 2 {
		t.Errorf("MaxShare = %v, want 2 (0.5 of the grants, a fair share is 0.25)", got)
	}
	if got := c.Rate(); got != 4 {
		t.Errorf("Rate = %v, want 4/s", got)
	}
	fair := Contention{Acquisitions: 6, Counts: []int{2, 2, 2}}
	if got := fair.MaxShare(); math.Abs(got-1) > 1e-12 {
		t.Errorf("MaxShare of a fair run = %v, want 1", got)
	}
	var none Contention
	if none.MaxShare() != 0 || none.Rate() != 0 || len(none.Shares()) != 0 {
		t.Errorf("an empty contention has figures: %v %v %v", none.MaxShare(), none.Rate(), none.Shares())
	}
}

func TestFromGrants(t *testing.T) {
	t0 := time.Unix(1000, 0)
	at := func(ms int) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }
	gs := []grant{
		// Out of order on purpose: grants are sorted by their time.
		{asked: at(0), got: at(10), releasing: at(11), released: at(13)},
		{asked: at(0), got: at(1), releasing: at(2), released: at(3)},
		// Asked at 5 ms and granted at 6 ms, ahead of the one that asked
		// at 0 ms and waited until 10 ms: an overtake.
		{asked: at(5), got: at(6), releasing: at(6), released: at(7)},
	}
	var c Contention
	c.fromGrants(gs)
	if c.Acquisitions != 3 {
		t.Errorf("Acquisitions = %d", c.Acquisitions)
	}
	ms := time.Millisecond
	if !slices.Equal(c.Releases, []time.Duration{ms, ms, 2 * ms}) {
		t.Errorf("Releases = %v", c.Releases)
	}
	if !slices.Equal(c.Handoffs, []time.Duration{4 * ms, 4 * ms}) {
		t.Errorf("Handoffs = %v, want 6-2 and 10-6 ms", c.Handoffs)
	}
	if c.Overtakes != 1 {
		t.Errorf("Overtakes = %d, want 1 (asked at 5 ms, served before the one asking at 0 ms)", c.Overtakes)
	}
}

func TestMerge(t *testing.T) {
	a := Contention{Acquisitions: 2, Duration: time.Second, Counts: []int{1, 1},
		Waits: [][]time.Duration{{1}, {2}}, Handoffs: []time.Duration{3}, Overlaps: 1, Overtakes: 2}
	b := Contention{Acquisitions: 3, Duration: time.Second, Counts: []int{2, 1},
		Waits: [][]time.Duration{{4, 5}, {6}}, Handoffs: []time.Duration{7, 8}}
	var pooled *Contention
	pooled = pooled.Merge(a)
	pooled.Merge(b)
	if a.Waits[0][0] != 1 || len(a.Waits[0]) != 1 {
		t.Errorf("merging changed its first input: %v", a.Waits)
	}
	if pooled.Acquisitions != 5 || pooled.Duration != 2*time.Second || !slices.Equal(pooled.Counts, []int{3, 2}) ||
		len(pooled.Waits[0]) != 3 || len(pooled.Handoffs) != 3 || pooled.Overlaps != 1 || pooled.Overtakes != 2 {
		t.Errorf("pooled = %+v", *pooled)
	}
	if got := (Rounds{a, b}).Pooled(); got.Acquisitions != 5 {
		t.Errorf("Rounds.Pooled = %+v", got)
	}
	if got := (Rounds{a, b}).Best(); got.Acquisitions != 3 {
		t.Errorf("Rounds.Best took the round of %d grants", got.Acquisitions)
	}
}
