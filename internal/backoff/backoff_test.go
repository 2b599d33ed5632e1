package backoff

import (
	"testing"
	"time"
)

// fixedRand makes Jitter deterministic for one test: randN returns
// pick(n), which must lie in [0, n).
func fixedRand(t *testing.T, pick func(n time.Duration) time.Duration) {
	t.Helper()
	old := randN
	t.Cleanup(func() { randN = old })
	randN = func(n time.Duration) time.Duration {
		v := pick(n)
		if v < 0 || v >= n {
			t.Fatalf("test random source gave %v for [0, %v)", v, n)
		}
		return v
	}
}

// TestNextDoubles: the steps are lo, 2lo, 4lo, ... capped at hi; with the
// random source at its top each delay is the whole step, at its bottom
// half of it.
func TestNextDoubles(t *testing.T) {
	const lo, hi = 10 * time.Millisecond, 250 * time.Millisecond
	steps := []time.Duration{10, 20, 40, 80, 160, 250, 250, 250}
	for _, c := range []struct {
		name string
		pick func(n time.Duration) time.Duration
		want func(step time.Duration) time.Duration
	}{
		{"top", func(n time.Duration) time.Duration { return n - 1 }, func(s time.Duration) time.Duration { return s }},
		{"bottom", func(time.Duration) time.Duration { return 0 }, func(s time.Duration) time.Duration { return s / 2 }},
	} {
		t.Run(c.name, func(t *testing.T) {
			fixedRand(t, c.pick)
			var b Backoff
			for i, s := range steps {
				if got, want := b.Next(lo, hi), c.want(s*time.Millisecond); got != want {
					t.Fatalf("delay %d = %v, want %v", i, got, want)
				}
			}
		})
	}
}

// TestReset: after Reset the doubling starts again at lo.
func TestReset(t *testing.T) {
	fixedRand(t, func(n time.Duration) time.Duration { return n - 1 })
	var b Backoff
	for range 5 {
		b.Next(5*time.Millisecond, time.Second)
	}
	b.Reset()
	if got := b.Next(5*time.Millisecond, time.Second); got != 5*time.Millisecond {
		t.Fatalf("first delay after Reset = %v, want 5ms", got)
	}
}

// TestNextCapChanges: one Backoff capped by two bounds (as the portable
// layer's waits use it: a low cap while the lock is held, a higher one
// while the store is unreachable) never exceeds the cap of the call, and
// doubles on from where it stands.
func TestNextCapChanges(t *testing.T) {
	fixedRand(t, func(n time.Duration) time.Duration { return n - 1 })
	const lo = 5 * time.Millisecond
	var b Backoff
	for _, c := range []struct{ hi, want time.Duration }{
		{time.Second, 5 * time.Millisecond},
		{time.Second, 10 * time.Millisecond},
		{time.Second, 20 * time.Millisecond},
		{15 * time.Millisecond, 15 * time.Millisecond}, // cut to the lower cap
		{time.Second, 30 * time.Millisecond},           // doubles from the cut step
	} {
		if got := b.Next(lo, c.hi); got != c.want {
			t.Fatalf("Next(%v, %v) = %v, want %v", lo, c.hi, got, c.want)
		}
	}
}

// TestJitterRange: with the real random source every delay lies in
// [d/2, d]; a bounded number of draws.
func TestJitterRange(t *testing.T) {
	for _, d := range []time.Duration{1, 2, 3, time.Millisecond, time.Second} {
		for range 1000 {
			if got := Jitter(d); got < d/2 || got > d {
				t.Fatalf("Jitter(%v) = %v, outside [%v, %v]", d, got, d/2, d)
			}
		}
	}
	if got := Jitter(0); got != 0 {
		t.Fatalf("Jitter(0) = %v", got)
	}
}
