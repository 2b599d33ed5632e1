package conformance

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/distlock/distlock"
	"github.com/distlock/distlock/backend"
)

// testGoneLockReleased checks the rule that every Grant is released once
// (backend.Lock): the portable layer releases a lock whose Refresh said
// ErrNotHeld, so a driver frees what it kept for the lock in Release; that
// Release must answer ErrNotHeld, free nothing (not the next holder's
// lock), and leave the lock out of what the driver pushes doubt to.
func testGoneLockReleased(t *testing.T, e *env) {
	e.part(t, "driver", func(t *testing.T) { testGoneRelease(t, e) })
	e.part(t, "portable", func(t *testing.T) { testGoneReleasedOnce(t, e) })
}

// goneLock makes d's lock on key gone behind its back and returns once a
// Refresh says so.
func (e *env) goneLock(t *testing.T, g backend.Grant, key string) {
	t.Helper()
	if err := e.h.Delete(ctxFor(t, 10*time.Second), key); err != nil {
		t.Fatalf("harness Delete: %v", err)
	}
	var err error
	if !eventually(2*e.ttl+5*time.Second, func() bool {
		err = g.Lock.Refresh(ctxFor(t, 10*time.Second), e.ttl)
		return errors.Is(err, backend.ErrNotHeld)
	}) {
		t.Fatalf("Refresh of a lock deleted in the store = %v, want ErrNotHeld", err)
	}
}

// testGoneRelease: at the driver level, the Release that follows a
// Refresh's ErrNotHeld answers ErrNotHeld, leaves the next holder's lock
// alone, and no doubt or restore reaches the released lock afterwards.
func testGoneRelease(t *testing.T, e *env) {
	key := e.key("gone")
	d1, d2 := e.driver(t), e.driver(t)
	var released atomic.Bool
	var late atomic.Int32
	req := e.request(key, "owner-one-0123456789abcdef")
	req.OnDoubt = func(error, time.Time) {
		if released.Load() {
			late.Add(1)
		}
	}
	req.OnRestored = func() {
		if released.Load() {
			late.Add(1)
		}
	}
	g1, err := d1.TryAcquire(ctxFor(t, 10*time.Second), req)
	if err != nil {
		t.Fatalf("TryAcquire: %v", err)
	}
	e.goneLock(t, g1, key)
	var g2 backend.Grant
	req2 := e.request(key, "owner-two-0123456789abcdef")
	req2.TTL = e.longTTL(d2.Capabilities()) // no one renews it: it outlives the checks
	if !eventually(3*e.ttl, func() bool {
		g2, err = d2.TryAcquire(ctxFor(t, 10*time.Second), req2)
		return err == nil
	}) {
		t.Fatalf("another client could not take the key after the lock was deleted: %v", err)
	}
	t.Cleanup(func() { _ = g2.Lock.Release(ctxFor(t, 10*time.Second)) })
	if err := g1.Lock.Release(ctxFor(t, 10*time.Second)); !errors.Is(err, backend.ErrNotHeld) {
		t.Errorf("Release of a lock a Refresh found gone = %v, want an error matching ErrNotHeld", err)
	}
	released.Store(true)
	e.stillHeld(t, key, "after the release of a lock a Refresh found gone")

	p, ok := e.h.(Partitioner)
	if !ok {
		t.Log("no doubt pushes checked: the harness cannot partition")
		return
	}
	// A lock still held on d1 shows when d1 pushes its doubt.
	doubted, restored := make(chan struct{}), make(chan struct{})
	var onceDoubt, onceRestored sync.Once
	control := e.request(e.key("gone-control"), "owner-one-0123456789abcdef")
	control.OnDoubt = func(error, time.Time) { onceDoubt.Do(func() { close(doubted) }) }
	control.OnRestored = func() { onceRestored.Do(func() { close(restored) }) }
	gc, err := d1.TryAcquire(ctxFor(t, 10*time.Second), control)
	if err != nil {
		t.Fatalf("TryAcquire of the control lock: %v", err)
	}
	defer func() { _ = gc.Lock.Release(ctxFor(t, 10*time.Second)) }()
	if err := p.Partition(ctxFor(t, 10*time.Second), d1); err != nil {
		t.Fatalf("harness Partition: %v", err)
	}
	pushes := true
	select {
	case <-doubted:
	case <-time.After(2 * e.ttl):
		pushes = false
		t.Log("no doubt pushes checked: the driver pushed none to a held lock within 2×TTL of a partition")
	}
	if err := p.Heal(ctxFor(t, 10*time.Second), d1); err != nil {
		t.Fatalf("harness Heal: %v", err)
	}
	// Restores, if the driver pushes them, reach every lock it holds in one
	// push: the control lock's says the push came.
	if pushes {
		select {
		case <-restored:
		case <-time.After(2 * e.ttl):
			t.Log("no restore pushes checked: the driver pushed none to a held lock within 2×TTL of the heal")
		}
	}
	if n := late.Load(); n > 0 {
		t.Errorf("the driver pushed %d doubts or restores to a lock after its Release (it kept a lock the store said was gone)", n)
	}
}

// testGoneReleasedOnce: the portable layer releases a lock whose Refresh
// said ErrNotHeld, exactly once, and the user's own Release of the lost
// lease still answers ErrLost.
func testGoneReleasedOnce(t *testing.T, e *env) {
	key := e.key("gone-portable")
	d, err := e.h.NewDriver(ctxFor(t, 30*time.Second))
	if err != nil {
		t.Fatalf("NewDriver: %v", err)
	}
	spy := &releaseSpy{Driver: d}
	l := distlock.New(spy, distlock.WithDefaultTTL(e.ttl))
	t.Cleanup(func() { _ = l.Close() })
	le, err := l.Acquire(ctxFor(t, 30*time.Second), key)
	if err != nil {
		t.Fatalf("Acquire: %v", err)
	}
	if err := e.h.Delete(ctxFor(t, 10*time.Second), key); err != nil {
		t.Fatalf("harness Delete: %v", err)
	}
	if !waitDone(le, 2*e.ttl+5*time.Second) {
		t.Fatal("a lock deleted behind its holder's back was not reported lost")
	}
	if !eventually(10*time.Second, func() bool { return len(spy.releases()) > 0 }) {
		t.Fatalf("the portable layer did not release a lost lock (%v)", le.Err())
	}
	if err := le.Release(ctxFor(t, 10*time.Second)); !errors.Is(err, distlock.ErrLost) {
		t.Errorf("the user's Release of the lost lease = %v, want ErrLost", err)
	}
	_ = l.Close()
	errs := spy.releases()
	if len(errs) != 1 {
		t.Fatalf("the lost lock was released %d times (%v), want once", len(errs), errs)
	}
	if errors.Is(le.Err(), distlock.ErrNotHeld) && !errors.Is(errs[0], backend.ErrNotHeld) {
		t.Errorf("the driver's Release of a lock its Refresh found gone = %v, want an error matching ErrNotHeld", errs[0])
	}
}

// releaseSpy records the outcome of every Release of its locks. It waits
// by polling, so it needs none of the driver's optional interfaces.
type releaseSpy struct {
	backend.Driver
	mu   sync.Mutex
	errs []error
}

func (s *releaseSpy) Capabilities() backend.Capabilities {
	return s.Driver.Capabilities().Polled()
}

func (s *releaseSpy) TryAcquire(ctx context.Context, req backend.Request) (backend.Grant, error) {
	g, err := s.Driver.TryAcquire(ctx, req)
	if err == nil {
		g.Lock = &spiedLock{Lock: g.Lock, s: s}
	}
	return g, err
}

func (s *releaseSpy) releases() []error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]error(nil), s.errs...)
}

type spiedLock struct {
	backend.Lock
	s *releaseSpy
}

func (l *spiedLock) Release(ctx context.Context) error {
	err := l.Lock.Release(ctx)
	l.s.mu.Lock()
	l.s.errs = append(l.s.errs, err)
	l.s.mu.Unlock()
	return err
}
