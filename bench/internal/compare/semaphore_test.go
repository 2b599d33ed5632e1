package compare

import (
	"testing"
	"time"

	"github.com/distlock/distlock/backend"
	"github.com/distlock/distlock/memlock"
)

// The semaphore workload runs distlock alone: it counts grants and the
// permits held at once (never above the limit on a sound semaphore),
// lists a backend without a semaphore as unsupported rather than failed,
// and counts the violations of a broken one.
func TestSemaphoreWorkload(t *testing.T) {
	c := Config{Workloads: []string{"semaphore"}, Permits: 2, SemaphoreWorkers: 6, Duration: 300 * time.Millisecond,
		TTL: time.Second, Rounds: 2, SemaphoreHold: 2 * time.Millisecond}
	mem, broken := distlockOnly(t, c, "sem", "a semaphore", "semaphore",
		func(d *memlock.Driver) backend.Driver { return ignoresLimit{d} })
	if v, _ := mem.Metric("acq/s"); v <= 0 {
		t.Errorf("mem: %v acq/s", v)
	}
	if v, _ := mem.Metric("max holders"); v < 1 || v > 2 {
		t.Errorf("mem: %v permits held at once, want 1 or 2 of 2", v)
	}
	if v, _ := broken.Metric("violations"); v == 0 {
		t.Errorf("a semaphore ignoring its limit showed no violation (max holders %v): the check cannot fail", func() float64 { v, _ := broken.Metric("max holders"); return v }())
	}
}
