package compare

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/distlock/distlock/backend"
	"github.com/distlock/distlock/bench/internal/compare/fakes"
	"github.com/distlock/distlock/bench/internal/measure"
	"github.com/distlock/distlock/memlock"
)

// The semaphore workload runs distlock alone: it counts grants and the
// permits held at once (never above the limit on a sound semaphore),
// lists a backend without a semaphore as unsupported rather than failed,
// and counts the violations of a broken one.
func TestSemaphoreWorkload(t *testing.T) {
	peer := fakes.NewChanLock()
	t.Cleanup(peer.Wait)
	targets := []Target{
		memTarget("mem", "sem-a"),
		{Name: "mem: chan-lock", Store: "mem", Library: "chan-lock", URL: "mem://sem-a",
			New: func(context.Context, time.Duration) (measure.Contender, error) { return peer, nil }},
		{Name: "mem: no-op (floor)", Store: "mem", Library: "no-op", Floor: true, URL: "mem://sem-a",
			New: func(context.Context, time.Duration) (measure.Contender, error) { return fakes.Noop{}, nil }},
		lockerTarget("none", "sem-b", func(d *memlock.Driver) backend.Driver { return noSemaphore{d} }),
		lockerTarget("broken", "sem-c", func(d *memlock.Driver) backend.Driver { return ignoresLimit{d} }),
	}
	c := Config{Workloads: []string{"semaphore"}, Permits: 2, SemaphoreWorkers: 6, Duration: 300 * time.Millisecond,
		TTL: time.Second, Rounds: 2, SemaphoreHold: 2 * time.Millisecond}
	if n := c.Steps(targets); n != 6 {
		t.Errorf("Steps = %d, want 6 (3 distlock targets × 2 rounds; peers and floors do not run it)", n)
	}
	results := Run(context.Background(), targets, c, nil)
	byName := map[string]Result{}
	for _, r := range results {
		byName[r.Backend] = r
	}
	if len(results) != 3 {
		t.Fatalf("%d results, want 3 (mem, none, broken): %+v", len(results), results)
	}
	mem := byName["mem"]
	if mem.Error != "" || mem.Unsupported != "" {
		t.Fatalf("mem: error %q, unsupported %q", mem.Error, mem.Unsupported)
	}
	if v, _ := mem.Metric("acq/s"); v <= 0 {
		t.Errorf("mem: %v acq/s", v)
	}
	if v, _ := mem.Metric("max holders"); v < 1 || v > 2 {
		t.Errorf("mem: %v permits held at once, want 1 or 2 of 2", v)
	}
	if v, ok := mem.Metric("violations"); !ok || v != 0 {
		t.Errorf("mem: violations %v (%v)", v, ok)
	}
	none := byName["none"]
	if none.Error != "" || !strings.Contains(none.Unsupported, "semaphore") || len(none.Metrics) != 0 {
		t.Errorf("a backend without a semaphore: error %q, unsupported %q, metrics %v; want it unsupported, not failed", none.Error, none.Unsupported, none.Metrics)
	}
	broken := byName["broken"]
	if v, _ := broken.Metric("violations"); v == 0 {
		t.Errorf("a semaphore ignoring its limit showed no violation (max holders %v): the check cannot fail", func() float64 { v, _ := broken.Metric("max holders"); return v }())
	}
}
