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
	// permits > 0: a semaphore's permits (semaphore.go), not a lock.
	permits int
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
	drop := l.d.claimDrop()
	return answer(drop, "refresh", l.refresh(time.Now(), ttl))
}

// refresh extends the lock to live at least ttl from now. d.s.mu is held.
func (l *lock) refresh(now time.Time, ttl time.Duration) error {
	if l.permits > 0 {
		return l.refreshPermit(now, ttl)
	}
	e := l.mine(now)
	if e == nil {
		return fmt.Errorf("memlock: refresh %q: %w", l.key, backend.ErrNotHeld)
	}
	if exp := now.Add(ttl); exp.After(e.expires) {
		e.expires = exp
	}
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
	drop := l.d.claimDrop()
	return answer(drop, "release", l.release(time.Now()))
}

// release gives back this hold. d.s.mu is held.
func (l *lock) release(now time.Time) error {
	if l.permits > 0 {
		return l.releasePermit(now)
	}
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
func (l *lock) forget() { l.d.held.Untrack(l) }
