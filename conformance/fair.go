package conformance

import (
	"slices"
	"testing"
	"time"
)

func testFairOrder(t *testing.T, e *env) {
	holder := e.locker(t)
	if c := holder.Capabilities(); !c.Fair {
		t.Skipf("%s does not declare itself fair (Capabilities.Fair is false)", c.Name)
	}
	const waiters = 4
	key := e.key("fair")
	le := mustAcquire(t, holder, key)
	// Waiters start one after another, each once the one before is in
	// line (see inOrder).
	order := make(chan int, waiters)
	for i := range waiters {
		c := e.locker(t)
		go func() {
			lw, err := c.Acquire(ctxFor(t, 60*time.Second), key)
			if err != nil {
				t.Errorf("waiter %d: %v", i, err)
				order <- -1
				return
			}
			order <- i
			_ = lw.Release(ctxFor(t, 10*time.Second))
		}()
		e.inOrder(t, c, holder.d, Mutex, key, i+1, max(e.ttl/4, 250*time.Millisecond))
	}
	release(t, le)
	var got []int
	for range waiters {
		select {
		case i := <-order:
			got = append(got, i)
		case <-time.After(60 * time.Second):
			t.Fatalf("only %d of %d waiters got the lock: %v", len(got), waiters, got)
		}
	}
	if want := []int{0, 1, 2, 3}; !slices.Equal(got, want) {
		t.Errorf("waiters were granted in the order %v, want %v", got, want)
	}
}
