package conformance

import (
	"errors"
	"testing"
	"time"

	"github.com/distlock/distlock"
	"github.com/distlock/distlock/backend"
)

// driver makes a bare driver (no Locker), closed when the case ends.
func (e *env) driver(t *testing.T) backend.Driver {
	t.Helper()
	d, err := e.h.NewDriver(ctxFor(t, 30*time.Second))
	if err != nil {
		t.Fatalf("NewDriver: %v", err)
	}
	t.Cleanup(func() { _ = d.Close() })
	return d
}

func (e *env) request(key, owner string) backend.Request {
	return backend.Request{Key: key, Owner: owner, TTL: e.ttl}
}

// longTTL is the TTL of a lock no one renews that must outlive a case's
// checks even on a slow machine: 10×TTL, or the store's maximum.
func (e *env) longTTL(caps backend.Capabilities) time.Duration {
	ttl := 10 * e.ttl
	if caps.MaxTTL > 0 && ttl > caps.MaxTTL {
		ttl = caps.MaxTTL
	}
	return ttl
}

// takeOver makes the lock d1 holds pass to d2 without d1 releasing it: by
// expiry for stores with per-lock TTLs, else by deleting it in the store.
// d2's lock, which no one renews, lives longTTL: long enough for the
// checks that follow.
func (e *env) takeOver(t *testing.T, d1, d2 backend.Driver, key string) (g1, g2 backend.Grant) {
	t.Helper()
	sent := time.Now()
	g1, err := d1.TryAcquire(ctxFor(t, 10*time.Second), e.request(key, "owner-one-0123456789abcdef"))
	if err != nil {
		t.Fatalf("first driver TryAcquire: %v", err)
	}
	bound := 3 * e.ttl
	if d1.Capabilities().Lifetime == backend.LifetimeTTL {
		// It ends by its TTL, counted from when it was asked for.
		bound += time.Until(sent.Add(e.ttl))
	} else if err := e.h.Delete(ctxFor(t, 10*time.Second), key); err != nil {
		t.Fatalf("harness Delete: %v", err)
	}
	req2 := e.request(key, "owner-two-0123456789abcdef")
	req2.TTL = e.longTTL(d2.Capabilities())
	ok := eventually(bound, func() bool {
		g2, err = d2.TryAcquire(ctxFor(t, 10*time.Second), req2)
		return err == nil
	})
	if !ok {
		t.Fatalf("second driver could not take the key after the first one's lock ended: %v", err)
	}
	t.Cleanup(func() { _ = g2.Lock.Release(ctxFor(t, 10*time.Second)) })
	return g1, g2
}

// stillHeld checks that a third client cannot take key.
func (e *env) stillHeld(t *testing.T, key, what string) {
	t.Helper()
	d3 := e.driver(t)
	g, err := d3.TryAcquire(ctxFor(t, 10*time.Second), e.request(key, "owner-three-0123456789abcd"))
	if err == nil {
		_ = g.Lock.Release(ctxFor(t, 10*time.Second))
		t.Fatalf("%s: the new holder's lock is gone: a third client took it", what)
	}
	if !isNotAcquired(err) {
		t.Fatalf("third client TryAcquire: unexpected error %v", err)
	}
}

// staleErrOK reports whether err is an acceptable answer to a stale
// holder's release or refresh.
func staleErrOK(err error, lifetime backend.LifetimeKind) bool {
	if errors.Is(err, distlock.ErrNotHeld) || errors.Is(err, distlock.ErrLost) {
		return true
	}
	// A connection-bound lock whose connection was killed cannot be
	// released through it at all.
	return lifetime == backend.LifetimeConnection && errors.Is(err, distlock.ErrUnavailable)
}

func testOwnerCheckedRelease(t *testing.T, e *env) {
	key := e.key("stale-release")
	d1, d2 := e.driver(t), e.driver(t)
	g1, _ := e.takeOver(t, d1, d2, key)
	err := g1.Lock.Release(ctxFor(t, 10*time.Second))
	if err == nil || !staleErrOK(err, d1.Capabilities().Lifetime) {
		t.Errorf("stale holder's Release = %v, want an error matching ErrNotHeld", err)
	}
	e.stillHeld(t, key, "after the stale holder's Release")

	// The same through the portable API.
	key = e.key("stale-release-lease")
	a, b := e.locker(t), e.locker(t)
	le := mustAcquire(t, a, key, distlock.WithoutAutoRenew())
	if a.Capabilities().Lifetime != backend.LifetimeTTL {
		if err := e.h.Delete(ctxFor(t, 10*time.Second), key); err != nil {
			t.Fatalf("harness Delete: %v", err)
		}
	}
	if !waitDone(le, 3*e.ttl) {
		t.Fatal("lease without auto-renewal was not reported lost after its TTL")
	}
	lb := mustAcquire(t, b, key)
	defer release(t, lb)
	if err := le.Release(ctxFor(t, 10*time.Second)); !errors.Is(err, distlock.ErrLost) && !errors.Is(err, distlock.ErrNotHeld) {
		t.Errorf("Release of a lost lease = %v, want ErrLost or ErrNotHeld", err)
	}
	if lb.Err() != nil {
		t.Errorf("new holder's lease ended: %v", lb.Err())
	}
	e.stillHeld(t, key, "after the lost lease's Release")
}

func testOwnerCheckedRefresh(t *testing.T, e *env) {
	key := e.key("stale-refresh")
	d1, d2 := e.driver(t), e.driver(t)
	g1, _ := e.takeOver(t, d1, d2, key)
	err := g1.Lock.Refresh(ctxFor(t, 10*time.Second), e.ttl)
	if err == nil || !staleErrOK(err, d1.Capabilities().Lifetime) {
		t.Errorf("stale holder's Refresh = %v, want an error matching ErrNotHeld", err)
	}
	e.stillHeld(t, key, "after the stale holder's Refresh")
}

func testDoubleRelease(t *testing.T, e *env) {
	key := e.key("double")
	a, b := e.locker(t), e.locker(t)
	le := mustAcquire(t, a, key)
	release(t, le)
	lb := mustAcquire(t, b, key)
	defer release(t, lb)
	err := le.Release(ctxFor(t, 10*time.Second))
	if !errors.Is(err, distlock.ErrReleased) {
		t.Errorf("second Release = %v, want an error matching ErrReleased", err)
	}
	if lb.Err() != nil {
		t.Errorf("the next holder's lease ended: %v", lb.Err())
	}

	// Driver level: a repeated release must not free another holder's lock.
	key = e.key("double-driver")
	d1, d2 := e.driver(t), e.driver(t)
	g1, err := d1.TryAcquire(ctxFor(t, 10*time.Second), e.request(key, "owner-one-0123456789abcdef"))
	if err != nil {
		t.Fatalf("TryAcquire: %v", err)
	}
	if err := g1.Lock.Release(ctxFor(t, 10*time.Second)); err != nil {
		t.Fatalf("first Release: %v", err)
	}
	req2 := e.request(key, "owner-two-0123456789abcdef")
	req2.TTL = e.longTTL(d2.Capabilities()) // no one renews it: it outlives the checks
	g2, err := d2.TryAcquire(ctxFor(t, 10*time.Second), req2)
	if err != nil {
		t.Fatalf("second driver could not take the released key: %v", err)
	}
	defer func() { _ = g2.Lock.Release(ctxFor(t, 10*time.Second)) }()
	if err := g1.Lock.Release(ctxFor(t, 10*time.Second)); !errors.Is(err, distlock.ErrNotHeld) {
		t.Errorf("driver's second Release = %v, want an error matching ErrNotHeld", err)
	}
	e.stillHeld(t, key, "after a repeated driver Release")
}
