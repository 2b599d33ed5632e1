package backend

import (
	"fmt"
	"sync"
	"time"
)

// Hooks are the callbacks of the Request a lock was granted for.
type Hooks struct {
	OnLost     func(err error)
	OnDoubt    func(cause error, until time.Time)
	OnRestored func()
}

// Hooks returns r's callbacks.
func (r Request) Hooks() Hooks {
	return Hooks{OnLost: r.OnLost, OnDoubt: r.OnDoubt, OnRestored: r.OnRestored}
}

// HeldSet is the set of locks a driver holds through one session,
// connection or client, for drivers that learn about all of them at once:
// contact lost (every lock in doubt), contact back, the session gone
// (every lock lost). It keeps each lock's Request hooks and calls them
// outside its lock, one push at a time, so a lock never sees a doubt
// overtake the restore that followed it.
//
// A driver tracks a lock when it grants it and untracks it in Release,
// which the portable layer calls once per Grant whatever happened to the
// lock (see Lock), so a driver needs no bookkeeping of its own for locks a
// Refresh found gone. Hooks must not call the set's Track, Doubt, Restored,
// Lost or End.
//
// The zero value is an empty set, in contact. L is the driver's lock type.
type HeldSet[L comparable] struct {
	push sync.Mutex // serialises the calls to hooks

	mu    sync.Mutex
	held  map[L]Hooks
	doubt error     // contact lost: the cause pushed, nil while in contact
	until time.Time // the until pushed with doubt
	ended error     // set by Lost or End: later Tracks fail with it
}

// Track adds l, granted with hooks h. If contact is lost at the moment
// (Doubt and no Restored since), h.OnDoubt is called at once with that
// doubt. Track fails, adding nothing, once the set has ended (Lost or
// End): the error wraps the cause given there.
func (s *HeldSet[L]) Track(l L, h Hooks) error {
	s.push.Lock()
	defer s.push.Unlock()
	s.mu.Lock()
	if s.ended != nil {
		err := s.ended
		s.mu.Unlock()
		return fmt.Errorf("lock not tracked: %w", err)
	}
	if s.held == nil {
		s.held = map[L]Hooks{}
	}
	s.held[l] = h
	doubt, until := s.doubt, s.until
	s.mu.Unlock()
	if doubt != nil && h.OnDoubt != nil {
		h.OnDoubt(doubt, until)
	}
	return nil
}

// Untrack removes l (released or given up); it is harmless if l is not in
// the set. Later pushes leave l out; one already under way may still reach
// it, which the portable layer ignores for a hold that has ended.
func (s *HeldSet[L]) Untrack(l L) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.held, l)
}

// Len returns how many locks are in the set.
func (s *HeldSet[L]) Len() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.held)
}

// Locks returns the locks in the set, in no particular order.
func (s *HeldSet[L]) Locks() []L {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.locksLocked()
}

func (s *HeldSet[L]) locksLocked() []L {
	out := make([]L, 0, len(s.held))
	for l := range s.held {
		out = append(out, l)
	}
	return out
}

// hooksLocked returns the hooks of every lock in the set. s.mu is held.
func (s *HeldSet[L]) hooksLocked() []Hooks {
	out := make([]Hooks, 0, len(s.held))
	for _, h := range s.held {
		out = append(out, h)
	}
	return out
}

// Doubt records that contact with the store is lost while the locks may
// still be held, and calls every lock's OnDoubt(cause, until): until is the
// last instant the driver can vouch for them, zero if it cannot tell (see
// Request.OnDoubt). Each call pushes again, so a driver that re-checks may
// call it repeatedly; one that reports only changes checks InDoubt first.
// Locks tracked later are told at once. It does nothing once the set has
// ended.
func (s *HeldSet[L]) Doubt(cause error, until time.Time) {
	if cause == nil {
		cause = fmt.Errorf("%w: contact with the store lost", ErrUnavailable)
	}
	s.push.Lock()
	defer s.push.Unlock()
	s.mu.Lock()
	if s.ended != nil {
		s.mu.Unlock()
		return
	}
	s.doubt, s.until = cause, until
	hooks := s.hooksLocked()
	s.mu.Unlock()
	for _, h := range hooks {
		if h.OnDoubt != nil {
			h.OnDoubt(cause, until)
		}
	}
}

// InDoubt reports whether contact is lost: Doubt was called and Restored
// was not since.
func (s *HeldSet[L]) InDoubt() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.doubt != nil
}

// Restored records that contact is back and, if the set was in doubt,
// calls every lock's OnRestored and returns true; otherwise it does
// nothing and returns false.
func (s *HeldSet[L]) Restored() bool {
	s.push.Lock()
	defer s.push.Unlock()
	s.mu.Lock()
	if s.doubt == nil || s.ended != nil {
		s.mu.Unlock()
		return false
	}
	s.doubt, s.until = nil, time.Time{}
	hooks := s.hooksLocked()
	s.mu.Unlock()
	for _, h := range hooks {
		if h.OnRestored != nil {
			h.OnRestored()
		}
	}
	return true
}

// Lost ends the set because every lock in it is gone (the session expired,
// the lease was revoked): it empties the set, calls every lock's
// OnLost(cause), and returns the locks. Later Tracks fail with cause. Only
// the first Lost or End does anything: later calls return nil.
func (s *HeldSet[L]) Lost(cause error) []L {
	s.push.Lock()
	defer s.push.Unlock()
	locks, hooks := s.end(cause)
	for _, h := range hooks {
		if h.OnLost != nil {
			h.OnLost(cause)
		}
	}
	return locks
}

// End ends the set without calling any hook (the driver is closing and
// abandons what is left): it empties the set and returns the locks. Later
// Tracks fail with cause. Only the first Lost or End does anything: later
// calls return nil.
func (s *HeldSet[L]) End(cause error) []L {
	s.push.Lock()
	defer s.push.Unlock()
	locks, _ := s.end(cause)
	return locks
}

// end marks the set ended and takes its locks. s.push is held.
func (s *HeldSet[L]) end(cause error) ([]L, []Hooks) {
	if cause == nil {
		cause = ErrLost
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.ended != nil {
		return nil, nil
	}
	s.ended = cause
	locks, hooks := s.locksLocked(), s.hooksLocked()
	clear(s.held)
	return locks, hooks
}
