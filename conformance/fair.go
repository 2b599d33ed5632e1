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
	// line: counted by the store where it can (else once it waits in its
	// client).
	order := make(chan int, waiters)
	counted := false
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
		counted = e.inLine(t, c, 1, holder.d, Mutex, key, i+1)
	}
	if !counted {
		t.Logf("%s cannot count its waiters: each waiter started once the one before was waiting in its client", holder.Capabilities().Name)
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
