package measure

import (
	"slices"
	"testing"
	"time"
)

func TestPercentileNearestRank(t *testing.T) {
	// The textbook example of the nearest-rank method.
	xs := []int{35, 20, 15, 50, 40}
	for _, c := range []struct {
		p    float64
		want int
	}{{0, 15}, {5, 15}, {20, 15}, {30, 20}, {40, 20}, {50, 35}, {99, 50}, {100, 50}} {
		if got := Percentile(xs, c.p); got != c.want {
			t.Errorf("Percentile(%v, %v) = %v, want %v", xs, c.p, got, c.want)
		}
	}
	if !slices.Equal(xs, []int{35, 20, 15, 50, 40}) {
		t.Errorf("Percentile sorted its input: %v", xs)
	}
}

func TestPercentileTenSamples(t *testing.T) {
	var ds []time.Duration
	for i := 10; i >= 1; i-- {
		ds = append(ds, time.Duration(i)*time.Millisecond)
	}
	for p, want := range map[float64]int{10: 1, 11: 2, 50: 5, 51: 6, 90: 9, 91: 10, 99: 10, 100: 10} {
		if got := Percentile(ds, p); got != time.Duration(want)*time.Millisecond {
			t.Errorf("p%v = %v, want %vms", p, got, want)
		}
	}
	if m := Median(ds); m != 5*time.Millisecond {
		t.Errorf("median of an even count = %v, want the lower middle 5ms", m)
	}
}

// Whole percentiles of large counts land on exact ranks, with no
// floating-point drift to the next sample.
func TestPercentileLargeCount(t *testing.T) {
	ds := make([]time.Duration, 100000)
	for i := range ds {
		ds[i] = time.Duration(i+1) * time.Microsecond
	}
	for p := 1; p <= 100; p++ {
		if got, want := PercentileSorted(ds, float64(p)), time.Duration(p)*time.Millisecond; got != want {
			t.Fatalf("p%d = %v, want %v", p, got, want)
		}
	}
	if got := Percentile([]float64{0.5, 0.25, 1}, 50); got != 0.5 {
		t.Errorf("p50 of floats = %v", got)
	}
}

func TestPercentileEmpty(t *testing.T) {
	if got := Percentile([]time.Duration(nil), 99); got != 0 {
		t.Errorf("p99 of nothing = %v", got)
	}
	if s := Summarize(nil); s != (Summary{}) {
		t.Errorf("summary of nothing = %+v", s)
	}
}

func TestSummarize(t *testing.T) {
	var ds []time.Duration
	for i := 1; i <= 200; i++ {
		ds = append(ds, time.Duration(i)*time.Microsecond+time.Nanosecond)
	}
	s := Summarize(ds)
	want := Summary{N: 200, P50: 100*time.Microsecond + 1, P99: 198*time.Microsecond + 1, Max: 200*time.Microsecond + 1}
	if s != want {
		t.Errorf("Summarize = %+v, want %+v", s, want)
	}
	r := s.Round(10 * time.Microsecond)
	if r.P50 != 100*time.Microsecond || r.P99 != 200*time.Microsecond || r.Max != 200*time.Microsecond || r.N != 200 {
		t.Errorf("rounded = %+v", r)
	}
}
