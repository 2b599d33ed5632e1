package memlock

import (
	"context"
	"fmt"
	"time"

	"github.com/distlock/distlock/backend"
)

// Semaphores: each semaphore key has a set of permit grants, one per
// owner, each with its own expiry and token. A grant is made while the
// permits of the unexpired grants plus those asked for are within the
// acquirer's limit. Waiters poll, or sleep until a release is announced
// (a driver made with Wait=notify or queue); there is no queue of
// permits, so waiting for permits is not fair.

// semEntry is one semaphore's state. It exists while a permit is held or
// a subscriber listens.
type semEntry struct {
	key     string
	permits map[string]*permit // by owner; owners are unique per grant
	subs    map[*subscription]struct{}
}

type permit struct {
	n       int
	expires time.Time
	token   uint64
}

// semaphoreWait is how the driver's semaphore waiters wait.
func (d *Driver) semaphoreWait() backend.WaitKind {
	if d.wait == backend.WaitPoll {
		return backend.WaitPoll
	}
	return backend.WaitNotify
}

// semLocked returns key's semaphore with its expired permits purged,
// creating it if create is set. s.mu is held.
func (s *Store) semLocked(key string, now time.Time, create bool) *semEntry {
	if s.sems == nil {
		s.sems = map[string]*semEntry{}
	}
	e := s.sems[key]
	if e == nil {
		if !create {
			return nil
		}
		e = &semEntry{key: key, permits: map[string]*permit{}, subs: map[*subscription]struct{}{}}
		s.sems[key] = e
	}
	for owner, p := range e.permits {
		if !now.Before(p.expires) {
			delete(e.permits, owner)
		}
	}
	return e
}

// used returns the permits held and when the first of them expires.
func (e *semEntry) used(now time.Time) (n int, first time.Duration) {
	for _, p := range e.permits {
		n += p.n
		if left := p.expires.Sub(now); first == 0 || left < first {
			first = left
		}
	}
	return n, first
}

// semFreeLocked announces a release of e's permits and forgets e if
// nothing refers to it. s.mu is held.
func (s *Store) semFreeLocked(e *semEntry) {
	for sub := range e.subs {
		select {
		case sub.ch <- struct{}{}:
		default:
		}
	}
	s.semGC(e)
}

func (s *Store) semGC(e *semEntry) {
	if len(e.permits) == 0 && len(e.subs) == 0 {
		delete(s.sems, e.key)
	}
}

// semHeld counts the semaphores with a permit held at now. s.mu is held.
func (s *Store) semHeld(now time.Time) int {
	n := 0
	for _, e := range s.sems {
		for _, p := range e.permits {
			if now.Before(p.expires) {
				n++
				break
			}
		}
	}
	return n
}

// tryPermits is TryAcquire for a semaphore's permits.
func (d *Driver) tryPermits(ctx context.Context, req backend.Request) (backend.Grant, error) {
	if err := d.enter(ctx, "acquire permits"); err != nil {
		return backend.Grant{}, err
	}
	drop := d.claimDrop()
	now := time.Now()
	e := d.s.semLocked(req.Key, now, true)
	used, first := e.used(now)
	if _, dup := e.permits[req.Owner]; dup || used+req.Permits > req.Limit {
		d.s.semGC(e)
		d.s.mu.Unlock()
		return answerGrant(drop, "acquire permits", backend.Grant{}, backend.NotAcquired(req.Key, first))
	}
	d.s.seq++
	e.permits[req.Owner] = &permit{n: req.Permits, expires: now.Add(req.TTL), token: d.s.seq}
	l := &lock{d: d, key: req.Key, owner: req.Owner, token: d.s.seq, permits: req.Permits}
	_ = d.held.Track(l, req.Hooks())
	g := backend.Grant{Lock: l, Token: l.token, TTL: req.TTL, ValidFrom: now}
	d.s.mu.Unlock()
	return answerGrant(drop, "acquire permits", g, nil)
}

// subscribePermits is Subscribe for a semaphore.
func (d *Driver) subscribePermits(ctx context.Context, key string) (<-chan struct{}, func(), error) {
	if err := d.enter(ctx, "subscribe permits"); err != nil {
		return nil, nil, err
	}
	defer d.s.mu.Unlock()
	e := d.s.semLocked(key, time.Now(), true)
	sub := &subscription{key: key, ch: make(chan struct{}, 1)}
	e.subs[sub] = struct{}{}
	cancel := func() {
		d.s.mu.Lock()
		defer d.s.mu.Unlock()
		delete(e.subs, sub)
		if d.s.sems[key] == e {
			d.s.semGC(e)
		}
	}
	return sub.ch, cancel, nil
}

// minePermit returns l's permit if it is still held. s.mu is held.
func (l *lock) minePermit(now time.Time) (*semEntry, *permit) {
	e := l.d.s.semLocked(l.key, now, false)
	if e == nil {
		return nil, nil
	}
	p := e.permits[l.owner]
	if p == nil || p.token != l.token {
		return e, nil
	}
	return e, p
}

// refreshPermit is Refresh for a semaphore's permits. s.mu is held.
func (l *lock) refreshPermit(now time.Time, ttl time.Duration) error {
	_, p := l.minePermit(now)
	if p == nil {
		return fmt.Errorf("memlock: refresh permits of %q: %w", l.key, backend.ErrNotHeld)
	}
	if exp := now.Add(ttl); exp.After(p.expires) {
		p.expires = exp
	}
	return nil
}

// releasePermit is Release for a semaphore's permits. s.mu is held.
func (l *lock) releasePermit(now time.Time) error {
	e, p := l.minePermit(now)
	if p == nil {
		if e != nil {
			l.d.s.semGC(e)
		}
		return fmt.Errorf("memlock: release permits of %q: %w", l.key, backend.ErrNotHeld)
	}
	delete(e.permits, l.owner)
	l.d.s.semFreeLocked(e)
	return nil
}
