package compare

import (
	"testing"
	"time"

	"github.com/distlock/distlock/bench/internal/measure"
)

func TestThinning(t *testing.T) {
	var ds []time.Duration
	for i := 1; i <= 100000; i++ {
		ds = append(ds, time.Duration(i)*time.Microsecond)
	}
	s := toMS(ds)
	if len(s) != maxSamples || s[0] != 0.001 || s[len(s)-1] != 100 {
		t.Errorf("thinned to %d samples from %v to %v", len(s), s[0], s[len(s)-1])
	}
	// The hand-off chart reads percentiles of the thinned samples.
	if p := measure.PercentileSorted(s, 50); p < 49 || p > 51 {
		t.Errorf("p50 of the thinned samples = %v, want about 50", p)
	}
	if got := toMS(ds[:10]); len(got) != 10 {
		t.Errorf("short input thinned to %d", len(got))
	}
}
