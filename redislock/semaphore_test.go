package redislock

import (
	"slices"
	"testing"
	"time"

	"github.com/distlock/distlock"
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
	c := nodeClient(g.Node(0))
	defer c.Close()
	h := &countingHook{}
	c.AddHook(h)
	d, err := New(c, nil)
	if err != nil {
		t.Fatal(err)
	}
	l := distlock.New(d, distlock.WithDefaultTTL(time.Minute))
	defer l.Close()
	s, err := l.Semaphore("roundtrips-sem", 3)
	if err != nil {
		t.Fatal(err)
	}
	pair := func(n int) {
		le, err := s.AcquireN(ctx, n)
		if err != nil {
			t.Fatal(err)
		}
		if err := le.Release(ctx); err != nil {
			t.Fatal(err)
		}
	}
	pair(1) // warm-up: scripts loaded
	h.reset()
	for i := range pairs {
		pair(1 + i%3)
	}
	if got := h.calls(); !slices.Equal(got, []string{"evalsha", "evalsha"}) || h.n != 2*pairs {
		t.Errorf("%d pairs sent %d commands (one pair: %v), want 2 EVALSHA per pair", pairs, h.n, got)
	}
}
