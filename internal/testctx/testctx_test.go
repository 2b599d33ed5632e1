package testctx

import (
	"testing"
	"time"
)

// TestForEnds: the context ends after d.
func TestForEnds(t *testing.T) {
	ctx := For(t, time.Millisecond)
	select {
	case <-ctx.Done():
	case <-time.After(10 * time.Second): // bounded: the test fails on its own
		t.Fatal("context did not end after 1ms")
	}
}

// TestForInCleanups: a context made by For lives through the cleanups
// registered after it, and one made inside a cleanup lives too; each is
// canceled once the test's cleanups have run.
func TestForInCleanups(t *testing.T) {
	var early, inCleanup interface{ Err() error }
	t.Run("case", func(t *testing.T) {
		ctx := For(t, time.Minute)
		early = ctx
		t.Cleanup(func() {
			if err := ctx.Err(); err != nil {
				t.Errorf("in a later cleanup the context has ended: %v", err)
			}
			c := For(t, time.Minute)
			inCleanup = c
			if err := c.Err(); err != nil {
				t.Errorf("a context made in a cleanup has ended at once: %v", err)
			}
		})
	})
	if early.Err() == nil || inCleanup.Err() == nil {
		t.Errorf("after the case: contexts not canceled (%v, %v)", early.Err(), inCleanup.Err())
	}
}
