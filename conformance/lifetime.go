package conformance

import (
	"context"
	"errors"
	"math"
	"testing"
	"time"

	"github.com/distlock/distlock"
	"github.com/distlock/distlock/backend"
)

func testCrashedHolder(t *testing.T, e *env) {
	e.holderParts(t, func(t *testing.T, e *env, a *client) { runCrashedHolder(t, e, a) })
}

// runCrashedHolder is CrashedHolder with a (over the harness's client or a
// user-made one) the holder that dies.
func runCrashedHolder(t *testing.T, e *env, a *client) {
	key := e.key("crash")
	b := e.locker(t)
	le := mustAcquire(t, a, key)
	if err := e.h.Kill(ctxFor(t, 10*time.Second), a.d); err != nil {
		t.Fatalf("harness Kill: %v", err)
	}
	lb, err := b.Acquire(ctxFor(t, 4*e.ttl+10*time.Second), key)
	gotAt := time.Now()
	if err != nil {
		t.Fatalf("the crashed holder's lock never became free: %v", err)
	}
	defer release(t, lb)
	if a.Capabilities().Lifetime == backend.LifetimeConnection {
		t.Logf("the lock is bound to the connection: the store freed it when the connection dropped, before the holder could know")
		return
	}
	// The guarantee: the crashed client's validity ended before the store
	// granted the lock to anyone else.
	if dl := le.Deadline(); !dl.Before(gotAt) {
		t.Errorf("the crashed holder's lease was valid until %v, but another client held the lock at %v",
			dl.Format(time.StampMicro), gotAt.Format(time.StampMicro))
	}
	if !waitDone(le, 2*e.ttl) {
		t.Fatal("the crashed holder's lease was never reported lost")
	}
	if !errors.Is(le.Err(), distlock.ErrLost) {
		t.Errorf("crashed holder's Err() = %v, want ErrLost", le.Err())
	}
}

func testWatchdogRenews(t *testing.T, e *env) {
	key := e.key("renew")
	a, b := e.locker(t), e.locker(t)
	le := mustAcquire(t, a, key)
	// Held for 3×TTL (time must pass here: renewals are what is checked),
	// looked at every TTL/3 and at once if the lease ends.
	end := time.After(3 * e.ttl)
	tick := time.NewTicker(e.ttl / 3)
	defer tick.Stop()
	for held := true; held; {
		if isFree(t, b, key) {
			t.Fatal("another Locker took the key while the watchdog should have kept it")
		}
		select {
		case <-le.Done():
			t.Fatalf("lease ended while its holder was alive: %v", le.Err())
		case <-tick.C:
		case <-end:
			held = false
		}
	}
	if s := heldAgain(le); s != distlock.StateHeld {
		t.Errorf("State() = %v after 3×TTL, want held", s)
	}
	release(t, le)
}

func testNoAutoRenewExpires(t *testing.T, e *env) {
	key := e.key("norenew")
	a, b := e.locker(t), e.locker(t)
	le := mustAcquire(t, a, key, distlock.WithoutAutoRenew())
	if !waitDone(le, 2*e.ttl+5*time.Second) {
		t.Fatal("lease without auto-renewal did not end after its TTL")
	}
	if !errors.Is(le.Err(), distlock.ErrLost) {
		t.Errorf("Err() = %v, want ErrLost", le.Err())
	}
	if s := le.State(); s != distlock.StateLost {
		t.Errorf("State() = %v, want lost", s)
	}
	if !eventually(2*e.ttl, func() bool { return isFree(t, b, key) }) {
		t.Error("the expired lock never became free for another Locker")
	}
}

func testLossDetected(t *testing.T, e *env) {
	key := e.key("loss")
	a := e.locker(t)
	le := mustAcquire(t, a, key)
	if err := e.h.Delete(ctxFor(t, 10*time.Second), key); err != nil {
		t.Fatalf("harness Delete: %v", err)
	}
	if !waitDone(le, 2*e.ttl+5*time.Second) {
		t.Fatal("a lock deleted behind its holder's back was not reported lost")
	}
	if !errors.Is(le.Err(), distlock.ErrLost) {
		t.Errorf("Err() = %v, want ErrLost", le.Err())
	}
	if le.Context().Err() == nil {
		t.Error("lease context not canceled after the loss")
	}

	// Do's ctx is canceled by the loss, and Do reports it.
	key = e.key("loss-do")
	canceled := make(chan bool, 1)
	err := a.Do(ctxFor(t, 30*time.Second), key, func(ctx context.Context) error {
		go func() { _ = e.h.Delete(ctxFor(t, 10*time.Second), key) }()
		select {
		case <-ctx.Done():
			canceled <- true
		case <-time.After(2*e.ttl + 5*time.Second):
			canceled <- false
		}
		return nil
	})
	if !<-canceled {
		t.Error("Do's ctx was not canceled after the lock was deleted")
	}
	if !errors.Is(err, distlock.ErrLost) {
		t.Errorf("Do returned %v, want an error matching ErrLost", err)
	}
}

func testWaiterDies(t *testing.T, e *env) {
	key := e.key("waiter-dies")
	holder, w, third := e.locker(t), e.locker(t), e.locker(t)
	le := mustAcquire(t, holder, key)
	result := make(chan error, 1)
	go func() {
		lw, err := w.Acquire(ctxFor(t, 3*e.ttl), key)
		if err == nil {
			_ = lw.Release(ctxFor(t, 10*time.Second))
		}
		result <- err
	}()
	e.inLine(t, w, 1, holder.d, Mutex, key, 1)
	if err := e.h.Kill(ctxFor(t, 10*time.Second), w.d); err != nil {
		t.Fatalf("harness Kill: %v", err)
	}
	release(t, le)
	select {
	case err := <-result:
		if err == nil {
			t.Fatal("a waiter whose client died was granted the lock")
		}
		t.Logf("dead waiter's Acquire: %v", err)
	case <-time.After(3*e.ttl + 10*time.Second):
		t.Fatal("a waiter whose client died never returned")
	}
	if !eventually(2*e.ttl, func() bool { return isFree(t, third, key) }) {
		t.Error("after the holder released, the key did not become free: the dead waiter holds or blocks it")
	}
}

// testTTLBounds: a store declares the longest TTL it keeps, and a TTL above
// it (or above the library's limit) is refused with ErrInvalidConfig
// before anything reaches the store, never cut short or wrapped around.
func testTTLBounds(t *testing.T, e *env) {
	a, b := e.locker(t), e.locker(t)
	caps := a.Capabilities()
	if caps.MaxTTL <= 0 {
		t.Errorf("%s declares no MaxTTL (Capabilities.MaxTTL)", caps.Name)
	}
	key := e.key("ttl-bounds")
	for _, ttl := range []time.Duration{backend.TTLLimit + time.Millisecond, caps.MaxTTL + time.Second, math.MaxInt64} {
		le, err := a.TryAcquire(ctxFor(t, 10*time.Second), key, distlock.WithTTL(ttl))
		if err == nil {
			_ = le.Release(ctxFor(t, 10*time.Second))
			t.Fatalf("TryAcquire with TTL %v above the maximum %v succeeded", ttl, caps.MaxTTL)
		}
		if !errors.Is(err, distlock.ErrInvalidConfig) {
			t.Errorf("TryAcquire with TTL %v: %v, want ErrInvalidConfig", ttl, err)
		}
	}
	if !isFree(t, b, key) {
		t.Error("a refused TTL left the key held")
	}
}
