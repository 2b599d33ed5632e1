package distlock_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/distlock/distlock"
	"github.com/distlock/distlock/backend"
	"github.com/distlock/distlock/internal/shim"
	"github.com/distlock/distlock/memlock"
)

func newMemLocker(t *testing.T) (*distlock.Locker, *memlock.Store) {
	t.Helper()
	s := memlock.NewStore()
	l := newLocker(t, s, "", distlock.WithDefaultTTL(time.Minute))
	return l, s
}

// TestSemaphoreInvalidInputs: every bad input is refused with a clear
// error before anything reaches the store.
func TestSemaphoreInvalidInputs(t *testing.T) {
	l, store := newMemLocker(t)
	ctx := context.Background()
	for _, limit := range []int{0, -1, distlock.MaxSemaphoreLimit + 1} {
		if _, err := l.Semaphore("s", limit); !errors.Is(err, distlock.ErrInvalidConfig) {
			t.Errorf("Semaphore(limit %d): %v, want ErrInvalidConfig", limit, err)
		}
	}
	if _, err := l.Semaphore("", 2); !errors.Is(err, distlock.ErrInvalidKey) {
		t.Errorf("Semaphore with an empty key: %v, want ErrInvalidKey", err)
	}
	s, err := l.Semaphore("s", 2)
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range []int{0, -1, 3} {
		if _, err := s.TryAcquireN(ctx, n); !errors.Is(err, distlock.ErrInvalidConfig) {
			t.Errorf("TryAcquireN(%d) of 2: %v, want ErrInvalidConfig", n, err)
		}
		if _, err := s.AcquireN(ctx, n); !errors.Is(err, distlock.ErrInvalidConfig) {
			t.Errorf("AcquireN(%d) of 2: %v, want ErrInvalidConfig", n, err)
		}
	}
	if _, err := s.Acquire(ctx, distlock.WithOwner(strings.Repeat("h", distlock.MaxCandidateValueLen+1))); !errors.Is(err, distlock.ErrInvalidConfig) {
		t.Errorf("Acquire WithOwner of a label too long for its suffix: %v, want ErrInvalidConfig", err)
	}
	if _, err := s.Acquire(ctx, distlock.WithTTL(-time.Second)); !errors.Is(err, distlock.ErrInvalidConfig) {
		t.Errorf("Acquire with a negative TTL: %v, want ErrInvalidConfig", err)
	}
	if n := store.Len(); n != 0 {
		t.Errorf("%d keys in the store after refused inputs, want 0", n)
	}
}

// noSemaphore is memlock declaring no semaphore, as a store without one
// does.
type noSemaphore struct{ shim.Notifier }

func (d noSemaphore) Capabilities() backend.Capabilities {
	c := d.Driver.Capabilities()
	c.Semaphore = ""
	return c
}

func TestSemaphoreUnsupported(t *testing.T) {
	d, _ := memlock.NewStore().NewDriver(nil)
	l := distlock.New(noSemaphore{shim.Notifier{Driver: d}})
	defer l.Close()
	if _, err := l.Semaphore("s", 2); !errors.Is(err, distlock.ErrUnsupported) || !strings.Contains(err.Error(), "the mem backend offers no semaphore") {
		t.Errorf("Semaphore on a driver that declares none: %v, want ErrUnsupported naming the backend", err)
	}
}

// TestSemaphoreCapabilitiesChecked: a driver without the wait interface
// its capabilities name for permits is refused.
func TestSemaphoreCapabilitiesChecked(t *testing.T) {
	d, _ := memlock.NewStore().NewDriver(nil)
	nd := noSemaphore{shim.Notifier{Driver: d}} // a Notifier without Wait
	c := d.Capabilities()
	c.Semaphore = backend.WaitQueue
	if err := c.Check(nd); err == nil || !strings.Contains(err.Error(), "semaphore=queue but the driver has no Wait method") {
		t.Errorf("Check of semaphore=queue for a driver without Wait: %v", err)
	}
	c.Semaphore = "sometimes"
	if err := c.Check(d); err == nil {
		t.Error("Check passed an unknown semaphore wait kind")
	}
}

// TestPermitIsNotTheLock: a permit's Context carries its owner, but an
// Acquire of the lock of the same name with it is refused (a permit is
// not that lock), while other keys re-use the owner as usual.
func TestPermitIsNotTheLock(t *testing.T) {
	l, _ := newMemLocker(t)
	ctx := context.Background()
	s, err := l.Semaphore("k", 2)
	if err != nil {
		t.Fatal(err)
	}
	p, err := s.Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if p.Permits() != 1 || p.Key() != "k" || p.Token() == 0 {
		t.Errorf("permit: Permits %d, Key %q, Token %d", p.Permits(), p.Key(), p.Token())
	}
	if _, err := l.TryAcquire(p.Context(), "k"); !errors.Is(err, distlock.ErrInvalidConfig) {
		t.Errorf("TryAcquire of the lock k with a permit's Context: %v, want ErrInvalidConfig", err)
	}
	other, err := l.TryAcquire(p.Context(), "other")
	if err != nil {
		t.Fatalf("TryAcquire of another key with a permit's Context: %v", err)
	}
	if other.Owner() != p.Owner() || other.Permits() != 0 {
		t.Errorf("lease on another key: owner %q (permit's %q), permits %d", other.Owner(), p.Owner(), other.Permits())
	}
	if err := other.Release(ctx); err != nil {
		t.Fatal(err)
	}
	if err := p.Release(ctx); err != nil {
		t.Fatal(err)
	}
	if err := p.Release(ctx); !errors.Is(err, distlock.ErrReleased) {
		t.Errorf("second Release: %v, want ErrReleased", err)
	}
}

// TestSemaphoreFullError: a try on a full semaphore fails with
// ErrNotAcquired, in words that speak of the semaphore's permits, not of
// a lock's owner.
func TestSemaphoreFullError(t *testing.T) {
	l, _ := newMemLocker(t)
	ctx := context.Background()
	s, err := l.Semaphore("pool", 2)
	if err != nil {
		t.Fatal(err)
	}
	p, err := s.AcquireN(ctx, 2)
	if err != nil {
		t.Fatal(err)
	}
	defer p.Release(ctx)
	_, err = s.TryAcquire(ctx)
	if !errors.Is(err, distlock.ErrNotAcquired) {
		t.Fatalf("TryAcquire of a full semaphore: %v, want ErrNotAcquired", err)
	}
	if want := `distlock: semaphore "pool": not enough free permits for 1`; !strings.HasPrefix(err.Error(), want) {
		t.Errorf("TryAcquire of a full semaphore: %q, want it to begin %q", err, want)
	}
}

// TestSemaphoreOwnerLabel: WithOwner names who holds permits: each grant's
// owner is the label, a dot and a suffix of its own, so two grants under
// one label stay two holders (permits are never re-entered).
func TestSemaphoreOwnerLabel(t *testing.T) {
	ctx := t.Context()
	l := newLocker(t, memlock.NewStore(), "")
	s, err := l.Semaphore("labelled", 3)
	if err != nil {
		t.Fatal(err)
	}
	a, err := s.Acquire(ctx, distlock.WithOwner("host-1:42"))
	if err != nil {
		t.Fatal(err)
	}
	b, err := s.Acquire(ctx, distlock.WithOwner("host-1:42"))
	if err != nil {
		t.Fatal(err)
	}
	for _, le := range []*distlock.Lease{a, b} {
		if !strings.HasPrefix(le.Owner(), "host-1:42.") || len(le.Owner()) != len("host-1:42.")+32 {
			t.Errorf("permit owner %q, want host-1:42. and a 32-digit suffix", le.Owner())
		}
	}
	if a.Owner() == b.Owner() {
		t.Errorf("two grants under one label share the owner %q", a.Owner())
	}
	if err := a.Release(ctx); err != nil {
		t.Fatal(err)
	}
	if err := b.Release(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Acquire(ctx, distlock.WithOwner("has space")); !errors.Is(err, distlock.ErrInvalidConfig) {
		t.Errorf("Acquire WithOwner of an invalid owner: %v, want ErrInvalidConfig", err)
	}
}
