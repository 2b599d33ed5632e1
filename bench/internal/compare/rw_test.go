package compare

import (
	"testing"
	"time"

	"github.com/distlock/distlock/backend"
	"github.com/distlock/distlock/memlock"
)

// The rw workload runs distlock alone: it counts read and write grants,
// the readers held at once, lists a backend without read-write locks as
// unsupported rather than failed, and counts the violations of a broken
// one.
func TestRWWorkload(t *testing.T) {
	c := Config{Workloads: []string{"rw"}, RWWorkers: 6, RWReads: 80, Duration: 300 * time.Millisecond,
		TTL: time.Second, Rounds: 2, RWHold: 2 * time.Millisecond}
	mem, broken := distlockOnly(t, c, "rw", "read-write locks", "read-write",
		func(d *memlock.Driver) backend.Driver { return writesOverReaders{d} })
	for _, m := range []string{"acq/s", "read acq/s", "write acq/s", "read wait p99", "write wait p99"} {
		if v, ok := mem.Metric(m); !ok || v <= 0 {
			t.Errorf("mem: %s %v (%v)", m, v, ok)
		}
	}
	if v, _ := mem.Metric("max readers"); v < 2 {
		t.Errorf("mem: at most %v readers at once, want readers to share", v)
	}
	if v, _ := broken.Metric("violations"); v == 0 {
		t.Errorf("a read-write lock granting writes over readers showed no violation: the check cannot fail")
	}
}
