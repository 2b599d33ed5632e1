package distlock_test

import (
	"context"
	"testing"

	"github.com/distlock/distlock/memlock"
)

// pairAllocBudget is how many allocations an uncontended Acquire and
// Release may make over memlock, the store's own included (3 of them in
// session 11, when the pair made 10; 23 before that session's changes).
// The headroom is for changes elsewhere, not for the Locker to grow back.
const pairAllocBudget = 14

// TestPairAllocations pins the portable layer's allocations per
// uncontended acquisition: a count, not a time, so it holds under any
// load.
func TestPairAllocations(t *testing.T) {
	l := newLocker(t, memlock.NewStore(), "")
	ctx := context.Background()
	n := testing.AllocsPerRun(200, func() {
		le, err := l.Acquire(ctx, "allocs")
		if err != nil {
			t.Fatal(err)
		}
		if err := le.Release(ctx); err != nil {
			t.Fatal(err)
		}
	})
	if n > pairAllocBudget {
		t.Errorf("an Acquire and Release over memlock made %v allocations, want at most %d", n, pairAllocBudget)
	}
	t.Logf("%v allocations per pair", n)
}
