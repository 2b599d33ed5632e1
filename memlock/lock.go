package memlock

import (
	"context"
	"fmt"
	"time"

	"github.com/distlock/distlock/backend"
)

// lock is a lock held through a Driver.
type lock struct {
	d     *Driver
	key   string
	owner string
	token uint64
	hooks hooks
	known time.Time // the expiry the store last confirmed to d; guarded by d.s.mu
}

// mine returns key's entry if it is still held under this lock's owner and
// token. d.s.mu is held.
func (l *lock) mine(now time.Time) *entry {
	e := l.d.s.lookup(l.key, now, false)
	if e == nil || !e.held(now) || e.owner != l.owner || e.token != l.token {
		return nil
	}
	return e
}

// Refresh implements backend.Lock.
func (l *lock) Refresh(ctx context.Context, ttl time.Duration) error {
	if err := l.d.enter(ctx, "refresh"); err != nil {
		return err
	}
	defer l.d.s.mu.Unlock()
	now := time.Now()
	e := l.mine(now)
	if e == nil {
		l.forget() // gone: the portable layer does not release it
		return fmt.Errorf("memlock: refresh %q: %w", l.key, backend.ErrNotHeld)
	}
	if exp := now.Add(ttl); exp.After(e.expires) {
		e.expires = exp
	}
	l.known = e.expires
	l.d.s.armTimer(e)
	return nil
}

// Release implements backend.Lock.
func (l *lock) Release(ctx context.Context) error {
	l.forget() // the portable layer releases once, even if this fails
	if err := l.d.enter(ctx, "release"); err != nil {
		return err
	}
	defer l.d.s.mu.Unlock()
	now := time.Now()
	e := l.mine(now)
	if e == nil {
		return fmt.Errorf("memlock: release %q: %w", l.key, backend.ErrNotHeld)
	}
	e.holds--
	if e.holds == 0 {
		l.d.s.freeLocked(e, now)
	}
	return nil
}

// forget drops l from its driver's held locks (those Partition and Heal
// report to).
func (l *lock) forget() {
	l.d.mu.Lock()
	delete(l.d.held, l)
	l.d.mu.Unlock()
}
