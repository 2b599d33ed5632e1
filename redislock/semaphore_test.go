package redislock

import (
	"testing"
	"time"

	"github.com/distlock/distlock/sandbox"
)

// TestSemaphoreRoundTrips counts, on the wire, what one uncontended
// permit costs through a Locker: one script to acquire, one to release
// (docs/primitives.md quotes it), and one pipeline to renew every due
// permit and lock of the Locker. Deterministic: it counts commands.
func TestSemaphoreRoundTrips(t *testing.T) {
	const pairs = 5
	ctx := testCtx(t, time.Minute)
	g := sandbox.StartT(t, sandbox.Spec{Kind: sandbox.Redis})
	l, h, _ := countedLocker(t, g.Node(0), nil)
	s, err := l.Semaphore("roundtrips-sem", 3)
	if err != nil {
		t.Fatal(err)
	}
	// 1, 2 or 3 permits a pair (the warm-up takes 1).
	h.twoScriptsEach(t, "", pairs, func(i int) {
		le, err := s.AcquireN(ctx, 1+i%3)
		if err != nil {
			t.Fatal(err)
		}
		if err := le.Release(ctx); err != nil {
			t.Fatal(err)
		}
	})
}
