package distlock

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/distlock/distlock/memlock"
)

// TestReentryPastDeadline: re-entering a hold whose validity has run out
// (its deadline passed before the watchdog got to end it: a starved
// process, a late timer) must not return a Lease on it: the hold is lost,
// so a re-entry with the lost lease's Context fails (that ctx ended with
// the loss), and one with the owner given anew acquires the lock afresh.
// Both used to join the expired hold and return a Lease already past its
// validity, while the store could have handed the lock to someone else.
func TestReentryPastDeadline(t *testing.T) {
	ctx := context.Background()
	d, _ := memlock.NewStore().NewDriver(nil)
	l := New(d)
	defer l.Close()
	expire := func(le *Lease) { // the watchdog has not run yet when the deadline passes
		l.mu.Lock()
		le.h.deadline = time.Now().Add(-time.Millisecond)
		l.mu.Unlock()
	}

	le, err := l.TryAcquire(ctx, "k", WithTTL(time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	expire(le)
	if re, err := l.Acquire(le.Context(), "k", WithTTL(time.Minute)); err == nil {
		t.Errorf("re-entry with the Context of a lease past its validity = lease (Err %v), want an error", re.Err())
		_ = re.Release(ctx)
	} else if !errors.Is(err, ErrLost) {
		t.Errorf("re-entry with the Context of a lease past its validity: %v, want ErrLost", err)
	}

	le, err = l.TryAcquire(ctx, "k2", WithTTL(time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	expire(le)
	re, err := l.TryAcquire(ctx, "k2", WithTTL(time.Minute), WithOwner(le.Owner()))
	if err != nil {
		t.Fatalf("re-entry by owner: %v", err)
	}
	if err := re.Err(); err != nil {
		t.Errorf("re-entry by owner returned a lease past its validity: %v", err)
	}
	if re.h == le.h {
		t.Error("re-entry by owner joined the expired hold")
	}
	if le.Err() == nil {
		t.Error("the expired lease reports held")
	}
	_ = re.Release(ctx)
}
