package distlock

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/distlock/distlock/memlock"
)

// TestExpiryTimerStops: the timer that ends a hold at a pushed deadline
// while its renewal is in flight (off the watchdog's heap) is stopped when
// the renewal returns and when the hold ends, so it never outlives the
// hold or its Locker.
func TestExpiryTimerStops(t *testing.T) {
	ctx := context.Background()
	d, _ := memlock.NewStore().NewDriver(nil)
	l := New(d)
	defer l.Close()

	holdOf := func(le *Lease) *hold { return le.h }
	// inFlight takes h off the heap as the watchdog does for a renewal,
	// and pushes doubt with a deadline far enough away not to fire.
	inFlight := func(h *hold) *time.Timer {
		l.mu.Lock()
		l.wd.remove(h)
		h.renewing = true
		l.mu.Unlock()
		l.driverDoubt(h, errors.New("connection dropped"), time.Now().Add(time.Hour))
		l.mu.Lock()
		defer l.mu.Unlock()
		if h.doubt.expiry == nil {
			t.Fatal("no expiry timer for a hold in doubt off the heap")
		}
		return h.doubt.expiry
	}

	le, err := l.Acquire(ctx, "renewal-returns", WithTTL(time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	timer := inFlight(holdOf(le))
	l.renewed(holdOf(le), time.Now(), time.Minute, nil)
	if timer.Stop() {
		t.Error("the expiry timer was still armed after the renewal returned")
	}

	le2, err := l.Acquire(ctx, "hold-ends", WithTTL(time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	timer = inFlight(holdOf(le2))
	if err := le2.Release(ctx); err != nil {
		t.Fatal(err)
	}
	if timer.Stop() {
		t.Error("the expiry timer was still armed after the lease was released")
	}
	_ = le.Release(ctx)
}
