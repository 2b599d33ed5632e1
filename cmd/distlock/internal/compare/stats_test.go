package compare

import (
	"testing"
	"time"
)

func TestPercentileAndThinning(t *testing.T) {
	var ds []time.Duration
	for i := 1; i <= 100000; i++ {
		ds = append(ds, time.Duration(i)*time.Microsecond)
	}
	if p := percentile(ds, 50); p != 50*time.Millisecond {
		t.Errorf("p50 = %v", p)
	}
	if p := percentile(ds, 99); p != 99*time.Millisecond {
		t.Errorf("p99 = %v", p)
	}
	s := toMS(ds)
	if len(s) != maxSamples || s[0] != 0.001 || s[len(s)-1] != 100 {
		t.Errorf("thinned to %d samples from %v to %v", len(s), s[0], s[len(s)-1])
	}
	if p := percentileF(s, 50); p < 49 || p > 51 {
		t.Errorf("p50 of the thinned samples = %v, want about 50", p)
	}
	if got := toMS(ds[:10]); len(got) != 10 {
		t.Errorf("short input thinned to %d", len(got))
	}
}
