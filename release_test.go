package distlock_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/distlock/distlock"
	"github.com/distlock/distlock/backend"
	"github.com/distlock/distlock/internal/shim"
	"github.com/distlock/distlock/memlock"
)

// countingDriver counts the Release calls of each Grant and keeps each
// request's OnLost.
type countingDriver struct {
	shim.Notifier
	mu       sync.Mutex
	releases map[*countedLock][]error
	onLost   func(error)
}

func (d *countingDriver) TryAcquire(ctx context.Context, req backend.Request) (backend.Grant, error) {
	g, err := d.Driver.TryAcquire(ctx, req)
	if err == nil {
		cl := &countedLock{Lock: g.Lock, d: d}
		g.Lock = cl
		d.mu.Lock()
		d.releases[cl] = nil
		d.onLost = req.OnLost
		d.mu.Unlock()
	}
	return g, err
}

// released returns the errors of every Release of the only Grant so far.
func (d *countingDriver) released() []error {
	d.mu.Lock()
	defer d.mu.Unlock()
	for _, errs := range d.releases {
		return errs
	}
	return nil
}

type countedLock struct {
	backend.Lock
	d *countingDriver
}

func (l *countedLock) Release(ctx context.Context) error {
	err := l.Lock.Release(ctx)
	l.d.mu.Lock()
	l.d.releases[l] = append(l.d.releases[l], err)
	l.d.mu.Unlock()
	return err
}

func newCounting(t *testing.T) (*countingDriver, *memlock.Store, *distlock.Locker) {
	t.Helper()
	s := memlock.NewStore()
	inner, err := s.NewDriver(nil)
	if err != nil {
		t.Fatal(err)
	}
	d := &countingDriver{Notifier: shim.Notifier{Driver: inner}, releases: map[*countedLock][]error{}}
	l := distlock.New(d)
	t.Cleanup(func() { _ = l.Close() })
	return d, s, l
}

// TestGoneLockReleased: a lock whose Refresh says ErrNotHeld is released
// once by the portable layer (the driver answers ErrNotHeld), so drivers
// need no bookkeeping of their own for gone locks.
func TestGoneLockReleased(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		d, s, l := newCounting(t)
		le, err := l.Acquire(context.Background(), "gone", distlock.WithTTL(300*time.Millisecond))
		if err != nil {
			t.Fatal(err)
		}
		s.Delete("gone")
		select {
		case <-le.Done():
		case <-time.After(5 * time.Second):
			t.Fatal("a lock deleted in the store was not reported lost")
		}
		if !errors.Is(le.Err(), distlock.ErrLost) || !errors.Is(le.Err(), distlock.ErrNotHeld) {
			t.Errorf("Err() = %v, want ErrLost wrapping ErrNotHeld", le.Err())
		}
		deadline := time.Now().Add(5 * time.Second)
		for len(d.released()) == 0 && time.Now().Before(deadline) {
			time.Sleep(5 * time.Millisecond)
		}
		if err := le.Release(context.Background()); !errors.Is(err, distlock.ErrLost) {
			t.Errorf("the user's Release of the lost lease = %v, want ErrLost", err)
		}
		_ = l.Close()
		errs := d.released()
		if len(errs) != 1 {
			t.Fatalf("the lock was released %d times (%v), want once", len(errs), errs)
		}
		if !errors.Is(errs[0], backend.ErrNotHeld) {
			t.Errorf("the driver's Release of a gone lock = %v, want ErrNotHeld", errs[0])
		}
	})
}

// TestRepeatedOnLost: OnLost may be called more than once; the first call
// ends the lease with its cause, later ones change nothing, and the lock
// is released once.
func TestRepeatedOnLost(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		d, _, l := newCounting(t)
		le, err := l.Acquire(context.Background(), "lost-twice")
		if err != nil {
			t.Fatal(err)
		}
		first, second := errors.New("session expired"), errors.New("connection closed")
		d.mu.Lock()
		onLost := d.onLost
		d.mu.Unlock()
		onLost(first)
		onLost(second)
		<-le.Done()
		if !errors.Is(le.Err(), first) || errors.Is(le.Err(), second) {
			t.Errorf("Err() = %v, want the first cause only", le.Err())
		}
		_ = l.Close()
		onLost(second) // after the hold ended, and the Locker closed
		if n := len(d.released()); n != 1 {
			t.Errorf("the lock was released %d times, want once", n)
		}
	})
}
