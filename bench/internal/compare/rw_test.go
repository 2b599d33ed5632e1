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

// The rw workload runs distlock alone: it counts read and write grants,
// the readers held at once, lists a backend without read-write locks as
// unsupported rather than failed, and counts the violations of a broken
// one.
func TestRWWorkload(t *testing.T) {
	peer := fakes.NewChanLock()
	t.Cleanup(peer.Wait)
	targets := []Target{
		memTarget("mem", "rw-a"),
		{Name: "mem: chan-lock", Store: "mem", Library: "chan-lock", URL: "mem://rw-a",
			New: func(context.Context, time.Duration) (measure.Contender, error) { return peer, nil }},
		{Name: "mem: no-op (floor)", Store: "mem", Library: "no-op", Floor: true, URL: "mem://rw-a",
			New: func(context.Context, time.Duration) (measure.Contender, error) { return fakes.Noop{}, nil }},
		lockerTarget("none", "rw-b", func(d *memlock.Driver) backend.Driver { return noSemaphore{d} }),
		lockerTarget("broken", "rw-c", func(d *memlock.Driver) backend.Driver { return writesOverReaders{d} }),
	}
	c := Config{Workloads: []string{"rw"}, RWWorkers: 6, RWReads: 80, Duration: 300 * time.Millisecond,
		TTL: time.Second, Rounds: 2, RWHold: 2 * time.Millisecond}
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
	for _, m := range []string{"acq/s", "read acq/s", "write acq/s", "read wait p99", "write wait p99"} {
		if v, ok := mem.Metric(m); !ok || v <= 0 {
			t.Errorf("mem: %s %v (%v)", m, v, ok)
		}
	}
	if v, _ := mem.Metric("max readers"); v < 2 {
		t.Errorf("mem: at most %v readers at once, want readers to share", v)
	}
	if v, ok := mem.Metric("violations"); !ok || v != 0 {
		t.Errorf("mem: violations %v (%v)", v, ok)
	}
	none := byName["none"]
	if none.Error != "" || !strings.Contains(none.Unsupported, "read-write") || len(none.Metrics) != 0 {
		t.Errorf("a backend without read-write locks: error %q, unsupported %q, metrics %v; want it unsupported, not failed", none.Error, none.Unsupported, none.Metrics)
	}
	if v, _ := byName["broken"].Metric("violations"); v == 0 {
		t.Errorf("a read-write lock granting writes over readers showed no violation: the check cannot fail")
	}
}
