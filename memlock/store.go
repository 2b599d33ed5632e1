package memlock

import (
	"sync"
	"time"

	"github.com/distlock/distlock/backend"
)

// A Store is an in-process lock store: what a lock server is to its
// clients. Drivers made from the same Store compete for its locks as
// separate processes would for a server's. The zero Store is not usable:
// call NewStore.
type Store struct {
	mu    sync.Mutex
	locks map[string]*entry
	rw    map[string]*rwEntry // read-write locks (rwlock.go), made when first used
	seq   uint64              // last fencing token granted, for every key
	rwGen uint64              // last read hold made (rwlock.go)
	down  bool
	sems  map[string]*semEntry // semaphore.go
	// forced is the last forced release of each key (force.go).
	forced map[string]backend.Forced
}

// entry is one key's state. An entry exists while the key is held or has
// queued waiters.
type entry struct {
	key     string
	owner   string
	holds   int // drivers holding with owner (cross-process reentry)
	expires time.Time
	token   uint64
	value   string // the holder's SetValue (announce.go); "" if none
	waiters []*waiter
	subs    map[*subscription]struct{} // Subscribe: told of releases
	watches map[*subscription]struct{} // Watch: told of every change of holder or value
	timer   *time.Timer                // grants to the next waiter when the holder expires
}

// NewStore returns an empty Store.
func NewStore() *Store {
	return &Store{locks: map[string]*entry{}}
}

// SetAvailable makes the store reachable (true) or not (false), as if its
// server were stopped: while unavailable every call fails with an error
// matching distlock.ErrUnavailable, and held locks keep expiring. Use it to
// test how code behaves during an outage.
func (s *Store) SetAvailable(ok bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.down = !ok
}

// Delete removes key's lock behind its holder's back, as an operator
// deleting it on a server would; the holder learns at its next renewal.
func (s *Store) Delete(key string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if e := s.locks[key]; e != nil {
		s.freeLocked(e, time.Now())
	}
}

// Len returns the number of keys with state in the store (held, or with
// waiters), counting the semaphores with a permit held: 0 once every lock
// and permit is released and no one waits.
func (s *Store) Len() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	now := time.Now()
	n := s.semHeld(now)
	for _, e := range s.locks {
		if e.held(now) || len(e.waiters) > 0 {
			n++
		}
	}
	return n
}

func (e *entry) held(now time.Time) bool { return e.holds > 0 && now.Before(e.expires) }

// lookup returns key's live entry, creating it if create is set; an expired
// holder is removed first.
func (s *Store) lookup(key string, now time.Time, create bool) *entry {
	e := s.locks[key]
	if e != nil && e.holds > 0 && !now.Before(e.expires) {
		s.freeLocked(e, now)
		e = s.locks[key]
	}
	if e == nil && create {
		e = &entry{key: key, subs: map[*subscription]struct{}{}, watches: map[*subscription]struct{}{}}
		s.locks[key] = e
	}
	return e
}

// take grants key to owner for ttl, if it is free or already owner's.
func (s *Store) take(e *entry, owner string, ttl time.Duration, now time.Time) (backend.Grant, bool) {
	if e.holds > 0 && e.owner != owner {
		return backend.Grant{}, false
	}
	if e.holds == 0 {
		s.seq++
		e.owner, e.token, e.value = owner, s.seq, ""
		e.announce()
	}
	e.holds++
	if exp := now.Add(ttl); exp.After(e.expires) || e.holds == 1 {
		e.expires = exp
	}
	s.armTimer(e)
	return backend.Grant{Token: e.token, TTL: ttl, ValidFrom: now}, true
}

// freeLocked ends e's hold, then hands the key to the first queued waiter
// or announces the release to subscribers.
func (s *Store) freeLocked(e *entry, now time.Time) {
	e.holds, e.owner, e.expires, e.value = 0, "", time.Time{}, ""
	e.announce()
	for len(e.waiters) > 0 {
		w := e.waiters[0]
		e.waiters = e.waiters[1:]
		if g, ok := s.take(e, w.owner, w.ttl, now); ok {
			w.d.grantLocked(&g, e.key, w.owner, w.hooks)
			w.granted <- g
			return
		}
	}
	for sub := range e.subs {
		select {
		case sub.ch <- struct{}{}:
		default:
		}
	}
	s.gc(e)
}

// gc forgets e when nothing refers to it.
func (s *Store) gc(e *entry) {
	if e.holds == 0 && len(e.waiters) == 0 && len(e.subs) == 0 && len(e.watches) == 0 {
		if e.timer != nil {
			e.timer.Stop()
			e.timer = nil
		}
		delete(s.locks, e.key)
	}
}

// armTimer makes sure a held key with queued waiters is handed on when its
// holder expires.
func (s *Store) armTimer(e *entry) {
	if len(e.waiters) == 0 || e.holds == 0 {
		return
	}
	d := time.Until(e.expires)
	if e.timer == nil {
		e.timer = time.AfterFunc(d, func() { s.expire(e) })
		return
	}
	e.timer.Reset(d)
}

func (s *Store) expire(e *entry) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.locks[e.key] != e {
		return
	}
	now := time.Now()
	if e.holds > 0 && !now.Before(e.expires) {
		s.freeLocked(e, now)
	} else {
		s.armTimer(e)
	}
}

// Keys returns the keys with state in the store (held, or with waiters).
func (s *Store) Keys() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []string
	now := time.Now()
	for k, e := range s.locks {
		if e.held(now) || len(e.waiters) > 0 {
			out = append(out, k)
		}
	}
	return out
}
