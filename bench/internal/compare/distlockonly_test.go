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

// distlockOnly runs c, a workload distlock alone runs, in 2 rounds over
// five targets: mem (memlock, store prefix+"-a"), a chan-lock peer and a
// no-op floor on the same store, none (store prefix+"-b", without a
// semaphore or read-write locks) and broken (store prefix+"-c", memlock as
// broken wraps it). It checks that only the three distlock targets ran,
// mem without error or a violation and none listed as unsupported (its
// Unsupported naming unsupported; lacks says what it lacks in messages),
// not failed, and returns the results of mem and broken.
func distlockOnly(t *testing.T, c Config, prefix, lacks, unsupported string, broken func(*memlock.Driver) backend.Driver) (mem, brk Result) {
	t.Helper()
	peer := fakes.NewChanLock()
	t.Cleanup(peer.Wait)
	targets := []Target{
		memTarget("mem", prefix+"-a"),
		{Name: "mem: chan-lock", Store: "mem", Library: "chan-lock", URL: "mem://" + prefix + "-a",
			New: func(context.Context, time.Duration) (measure.Contender, error) { return peer, nil }},
		{Name: "mem: no-op (floor)", Store: "mem", Library: "no-op", Floor: true, URL: "mem://" + prefix + "-a",
			New: func(context.Context, time.Duration) (measure.Contender, error) { return fakes.Noop{}, nil }},
		lockerTarget("none", prefix+"-b", func(d *memlock.Driver) backend.Driver { return noSemaphore{d} }),
		lockerTarget("broken", prefix+"-c", broken),
	}
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
	mem = byName["mem"]
	if mem.Error != "" || mem.Unsupported != "" {
		t.Fatalf("mem: error %q, unsupported %q", mem.Error, mem.Unsupported)
	}
	if v, ok := mem.Metric("violations"); !ok || v != 0 {
		t.Errorf("mem: violations %v (%v)", v, ok)
	}
	none := byName["none"]
	if none.Error != "" || !strings.Contains(none.Unsupported, unsupported) || len(none.Metrics) != 0 {
		t.Errorf("a backend without %s: error %q, unsupported %q, metrics %v; want it unsupported, not failed", lacks, none.Error, none.Unsupported, none.Metrics)
	}
	return mem, byName["broken"]
}
