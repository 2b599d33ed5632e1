package conformance

import (
	"context"
	"testing"
	"time"

	"github.com/distlock/distlock"
)

func testReentrancy(t *testing.T, e *env) {
	key := e.key("reenter")
	a, b := e.locker(t), e.locker(t)
	outer := mustAcquire(t, a, key)
	viaCtx, err := a.Acquire(outer.Context(), key)
	if err != nil {
		t.Fatalf("re-entry through the lease's context: %v", err)
	}
	viaOwner, err := a.TryAcquire(context.Background(), key, distlock.WithOwner(outer.Owner()))
	if err != nil {
		t.Fatalf("re-entry with WithOwner: %v", err)
	}
	for _, le := range []*distlock.Lease{viaCtx, viaOwner} {
		if le.Token() != outer.Token() || le.Owner() != outer.Owner() {
			t.Errorf("re-entry has token %d owner %q, want the hold's %d %q", le.Token(), le.Owner(), outer.Token(), outer.Owner())
		}
	}
	if _, err := a.TryAcquire(ctxFor(t, 10*time.Second), key); !isNotAcquired(err) {
		t.Errorf("a different owner in the same Locker: TryAcquire = %v, want ErrNotAcquired", err)
	}
	// Releases balance acquisitions, in any order.
	for i, le := range []*distlock.Lease{outer, viaOwner} {
		release(t, le)
		if isFree(t, b, key) {
			t.Fatalf("the key became free after %d of 3 releases", i+1)
		}
	}
	if viaCtx.Err() != nil {
		t.Errorf("the last lease ended early: %v", viaCtx.Err())
	}
	release(t, viaCtx)
	if !isFree(t, b, key) {
		t.Error("the key is still held after all 3 leases were released")
	}
}

func testReentryNeverShortens(t *testing.T, e *env) {
	a, b := e.locker(t), e.locker(t)
	if !a.Capabilities().PerLockTTL {
		t.Skipf("%s: every lock has its session's TTL; there is no per-lock TTL to shorten", a.Capabilities().Name)
	}
	key := e.key("shorten")
	// The outer lease lives 6×TTL: the look below, after the re-entry's
	// shorter TTL, comes well before its end even on a slow machine.
	outer := mustAcquire(t, a, key, distlock.WithTTL(6*e.ttl), distlock.WithoutAutoRenew())
	dl := outer.Deadline()
	sent := time.Now()
	inner, err := a.Acquire(outer.Context(), key, distlock.WithTTL(e.ttl), distlock.WithoutAutoRenew())
	if err != nil {
		t.Fatalf("re-entry: %v", err)
	}
	if got := inner.Deadline(); got.Before(dl) {
		t.Errorf("re-entry with a shorter TTL moved the deadline from %v to %v", dl, got)
	}
	// Time must pass here: until the re-entry's TTL, had it applied, ran
	// out in the store (counted from when the re-entry was asked for).
	select {
	case <-outer.Done():
		t.Fatalf("lease ended at the shorter TTL: %v", outer.Err())
	case <-time.After(time.Until(sent.Add(e.ttl + e.ttl/2))):
	}
	if outer.Err() != nil {
		t.Fatalf("lease ended at the shorter TTL: %v", outer.Err())
	}
	if isFree(t, b, key) {
		t.Fatal("the store freed the lock at the re-entry's shorter TTL")
	}
	longer, err := a.Acquire(outer.Context(), key, distlock.WithTTL(8*e.ttl), distlock.WithoutAutoRenew())
	if err != nil {
		t.Fatalf("re-entry with a longer TTL: %v", err)
	}
	if !longer.Deadline().After(dl) {
		t.Errorf("re-entry with a longer TTL did not extend the lease (deadline %v)", longer.Deadline())
	}
	for _, le := range []*distlock.Lease{inner, longer, outer} {
		release(t, le)
	}
}

func testCrossProcessReentry(t *testing.T, e *env) {
	a, b, c := e.locker(t), e.locker(t), e.locker(t)
	if !a.Capabilities().CrossProcessReentry {
		t.Skipf("%s does not support re-entry across processes (Capabilities.CrossProcessReentry is false)", a.Capabilities().Name)
	}
	key := e.key("cross")
	la := mustAcquire(t, a, key)
	lb, err := b.TryAcquire(ctxFor(t, 10*time.Second), key, distlock.WithOwner(la.Owner()))
	if err != nil {
		t.Fatalf("another Locker with the same owner: %v", err)
	}
	if lb.Token() != la.Token() {
		t.Errorf("cross-process re-entry token %d, want %d", lb.Token(), la.Token())
	}
	release(t, la)
	if isFree(t, c, key) {
		t.Fatal("the key became free while the second Locker still held it")
	}
	release(t, lb)
	if !isFree(t, c, key) {
		t.Error("the key is still held after both Lockers released")
	}
}

// testFailedAttemptKeepsHold: an acquisition that fails (its ctx canceled
// before or while it ran) by another process with the same owner removes
// at most what it added itself: never the hold the first process has.
func testFailedAttemptKeepsHold(t *testing.T, e *env) {
	a, b, c := e.locker(t), e.locker(t), e.locker(t)
	if !a.Capabilities().CrossProcessReentry {
		t.Skipf("%s does not support re-entry across processes (Capabilities.CrossProcessReentry is false)", a.Capabilities().Name)
	}
	key := e.key("failed-attempt")
	la := mustAcquire(t, a, key)
	d := e.driver(t)
	attempts := map[string]func() (context.Context, context.CancelFunc){
		"canceled": func() (context.Context, context.CancelFunc) {
			ctx, cancel := context.WithCancel(context.Background())
			cancel()
			return ctx, cancel
		},
		"expired": func() (context.Context, context.CancelFunc) {
			return context.WithTimeout(context.Background(), time.Nanosecond)
		},
		"expiring": func() (context.Context, context.CancelFunc) {
			return context.WithTimeout(context.Background(), 200*time.Microsecond)
		},
	}
	for name, mk := range attempts {
		for range 5 {
			ctx, cancel := mk()
			if g, err := d.TryAcquire(ctx, e.request(key, la.Owner())); err == nil {
				// It went through: its hold is its own to give back.
				if err := g.Lock.Release(ctxFor(t, 10*time.Second)); err != nil {
					t.Fatalf("%s driver attempt went through, its release: %v", name, err)
				}
			}
			if le, err := b.TryAcquire(ctx, key, distlock.WithOwner(la.Owner())); err == nil {
				release(t, le)
			}
			cancel()
			if isFree(t, c, key) {
				t.Fatalf("a failed attempt (%s ctx) by another process with the same owner freed the first process's hold", name)
			}
		}
	}
	if la.Err() != nil {
		t.Fatalf("the first process's lease ended: %v", la.Err())
	}
	release(t, la)
	if !isFree(t, c, key) {
		t.Error("the key is still held after the only hold was released")
	}
}
