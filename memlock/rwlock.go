package memlock

import (
	"context"
	"fmt"
	"time"

	"github.com/distlock/distlock/backend"
)

// Read-write locks (backend.Read and backend.Write requests). Each key's read-write lock is an
// rwEntry of its own, apart from the key's mutex: a writer (owner, hold
// count, expiry), the readers (per owner: hold count, expiry), the mark of
// a writer waiting (owner, expiry), which keeps new readers out, and the
// token of the last write. Expired parts are dropped whenever the entry is
// looked at. Tokens come from the store's one counter, as the mutex's do.
type rwEntry struct {
	key       string
	writer    string
	wholds    int
	wexp      time.Time
	wtoken    uint64
	readers   map[string]*rwReader
	mark      string // a waiting writer's owner
	markExp   time.Time
	lastWrite uint64
	subs      map[*subscription]struct{}
}

type rwReader struct {
	holds int
	exp   time.Time
	gen   uint64 // tells this hold from a later one of the same owner (Store.rwGen)
}

// rwWait is how the driver's read-write waiters wait: notified of
// releases, unless the driver polls.
func (d *Driver) rwWait() backend.WaitKind {
	if d.wait == backend.WaitNotify {
		return backend.WaitNotify
	}
	return backend.WaitPoll
}

// rwLookup returns key's read-write entry with its expired parts
// dropped. d.s.mu is held.
func (s *Store) rwLookup(key string, now time.Time) *rwEntry {
	if s.rw == nil {
		s.rw = map[string]*rwEntry{}
	}
	e := s.rw[key]
	if e == nil {
		e = &rwEntry{key: key, readers: map[string]*rwReader{}, subs: map[*subscription]struct{}{}}
		s.rw[key] = e
	}
	if e.wholds > 0 && !now.Before(e.wexp) {
		e.writer, e.wholds = "", 0
	}
	for o, r := range e.readers {
		if !now.Before(r.exp) {
			delete(e.readers, o)
		}
	}
	if e.mark != "" && !now.Before(e.markExp) {
		e.mark = ""
	}
	return e
}

// blockers returns whether someone other than owner keeps mode out of e,
// and the soonest instant one of them expires.
func (e *rwEntry) blockers(owner string, mode backend.Kind) (bool, time.Time) {
	var soonest time.Time
	note := func(t time.Time) {
		if soonest.IsZero() || t.Before(soonest) {
			soonest = t
		}
	}
	if e.wholds > 0 && e.writer != owner {
		note(e.wexp)
	}
	if mode == backend.Write {
		for o, r := range e.readers {
			if o != owner {
				note(r.exp)
			}
		}
	} else if _, reading := e.readers[owner]; e.mark != "" && e.mark != owner && !reading {
		note(e.markExp)
	}
	return !soonest.IsZero(), soonest
}

// tryRW is TryAcquire for a side of a read-write lock.
func (d *Driver) tryRW(ctx context.Context, req backend.Request) (backend.Grant, error) {
	mode, waiting := req.Kind, req.Waiting
	if mode != backend.Read && mode != backend.Write {
		return backend.Grant{}, fmt.Errorf("memlock: acquire %q: %w: rw mode %v", req.Key, backend.ErrInvalidConfig, mode)
	}
	if err := d.enter(ctx, "acquire"); err != nil {
		return backend.Grant{}, err
	}
	defer d.s.mu.Unlock()
	now := time.Now()
	e := d.s.rwLookup(req.Key, now)
	if _, reading := e.readers[req.Owner]; mode == backend.Write && reading && e.writer != req.Owner {
		return backend.Grant{}, fmt.Errorf("memlock: acquire %q: %w: owner holds the read side", req.Key, backend.ErrUpgrade)
	}
	if blocked, until := e.blockers(req.Owner, mode); blocked {
		if mode == backend.Write && waiting && (e.mark == "" || e.mark == req.Owner) {
			e.mark, e.markExp = req.Owner, now.Add(req.TTL)
		}
		return backend.Grant{}, backend.NotAcquired(req.Key, until.Sub(now))
	}
	exp := now.Add(req.TTL)
	var token, gen uint64
	if mode == backend.Write {
		if e.wholds == 0 {
			d.s.seq++
			e.writer, e.wtoken, e.lastWrite, e.wexp = req.Owner, d.s.seq, d.s.seq, exp
		}
		e.wholds++
		e.wexp = later(e.wexp, exp)
		if e.mark == req.Owner {
			e.mark = ""
		}
		token = e.wtoken
	} else {
		r := e.readers[req.Owner]
		if r == nil {
			d.s.rwGen++
			r = &rwReader{gen: d.s.rwGen}
			e.readers[req.Owner] = r
		}
		r.holds++
		r.exp = later(r.exp, exp)
		token, gen = e.lastWrite, r.gen
	}
	l := &rwLock{d: d, key: req.Key, owner: req.Owner, mode: mode, token: token, gen: gen}
	return backend.Grant{Lock: l, Token: token, TTL: req.TTL, ValidFrom: now}, nil
}

func later(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}

// Withdraw implements backend.Notifier: it removes req.Owner's
// writer-waiting mark on req.Key's read-write lock.
func (d *Driver) Withdraw(ctx context.Context, req backend.Request) error {
	if req.Kind != backend.Write {
		return nil
	}
	if err := d.enter(ctx, "withdraw"); err != nil {
		return err
	}
	defer d.s.mu.Unlock()
	e := d.s.rwLookup(req.Key, time.Now())
	if e.mark == req.Owner {
		e.mark = ""
		e.announce() // readers the mark kept out may enter
	}
	return nil
}

func (e *rwEntry) announce() {
	for sub := range e.subs {
		select {
		case sub.ch <- struct{}{}:
		default:
		}
	}
}

// subscribeRW is Subscribe for a read-write lock.
func (d *Driver) subscribeRW(ctx context.Context, key string) (<-chan struct{}, func(), error) {
	if err := d.enter(ctx, "subscribe"); err != nil {
		return nil, nil, err
	}
	defer d.s.mu.Unlock()
	sub := &subscription{key: key, ch: make(chan struct{}, 1)}
	e := d.s.rwLookup(key, time.Now())
	e.subs[sub] = struct{}{}
	cancel := func() {
		d.s.mu.Lock()
		defer d.s.mu.Unlock()
		delete(e.subs, sub)
	}
	return sub.ch, cancel, nil
}

// rwLock is a side of a read-write lock held through a Driver.
type rwLock struct {
	d     *Driver
	key   string
	owner string
	mode  backend.Kind
	token uint64
	gen   uint64 // the read side: its rwReader's gen
}

// mine reports whether the lock is still held: the write hold of its
// token, or the read hold it joined (not a later read hold of the same
// owner, made after this one expired). d.s.mu is held.
func (l *rwLock) mine(e *rwEntry) bool {
	if l.mode == backend.Write {
		return e.wholds > 0 && e.writer == l.owner && e.wtoken == l.token
	}
	r := e.readers[l.owner]
	return r != nil && r.gen == l.gen
}

// Refresh implements backend.Lock.
func (l *rwLock) Refresh(ctx context.Context, ttl time.Duration) error {
	if err := l.d.enter(ctx, "refresh"); err != nil {
		return err
	}
	defer l.d.s.mu.Unlock()
	now := time.Now()
	e := l.d.s.rwLookup(l.key, now)
	if !l.mine(e) {
		return fmt.Errorf("memlock: refresh %q (%v): %w", l.key, l.mode, backend.ErrNotHeld)
	}
	if l.mode == backend.Write {
		e.wexp = later(e.wexp, now.Add(ttl))
	} else {
		r := e.readers[l.owner]
		r.exp = later(r.exp, now.Add(ttl))
	}
	return nil
}

// Release implements backend.Lock.
func (l *rwLock) Release(ctx context.Context) error {
	if err := l.d.enter(ctx, "release"); err != nil {
		return err
	}
	defer l.d.s.mu.Unlock()
	e := l.d.s.rwLookup(l.key, time.Now())
	if !l.mine(e) {
		return fmt.Errorf("memlock: release %q (%v): %w", l.key, l.mode, backend.ErrNotHeld)
	}
	if l.mode == backend.Write {
		e.wholds--
		if e.wholds == 0 {
			e.writer = ""
			e.announce()
		}
		return nil
	}
	r := e.readers[l.owner]
	r.holds--
	if r.holds == 0 {
		delete(e.readers, l.owner)
		e.announce()
	}
	return nil
}

// DeleteRW removes key's read-write lock behind its holders' backs (its
// writer and readers; the waiting mark and the last write's token stay),
// as an operator deleting it would.
func (s *Store) DeleteRW(key string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	e := s.rwLookup(key, time.Now())
	e.writer, e.wholds = "", 0
	clear(e.readers)
	e.announce()
}
