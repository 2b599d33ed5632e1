package sqllock

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/distlock/distlock/backend"
)

// A lease held on a session (session mode): its renewal, one statement per
// session for a whole batch, and its release.

// sessLock is a lease held on a session.
type sessLock struct {
	s   *session
	key string
	k   int64

	mu    sync.Mutex
	ended bool // released or found gone
}

// Refresh checks that l's session is alive and holds l's key, raising
// the session's idle timeout to ttl if that is longer; any statement
// restarts the server's idle timer of the session, and so renews every
// lock on it.
func (l *sessLock) Refresh(ctx context.Context, ttl time.Duration) error {
	return l.s.m.refresh(ctx, []*sessLock{l}, ttl)[0]
}

// refresh renews locks, all on one session, in one statement.
func (m *sessionMode) refresh(ctx context.Context, locks []*sessLock, ttl time.Duration) []error {
	errs := make([]error, len(locks))
	if ttl > m.d.dia.maxTTL() {
		for i, l := range locks {
			errs[i] = fmt.Errorf("sqllock: refresh %q: %w: TTL %v is beyond the server's longest idle timeout (%v)", l.key, backend.ErrInvalidConfig, ttl, m.d.dia.maxTTL())
		}
		return errs
	}
	s := locks[0].s
	secs := seconds(ttl)
	var held map[int64]bool
	err := s.run(ctx, func(ctx context.Context, c *sql.Conn) error {
		var err error
		keys := make([]int64, len(locks))
		for i, l := range locks {
			keys[i] = l.k
		}
		held, err = m.sd.check(ctx, c, s.raise(secs), keys)
		if err == nil && secs > s.ttl {
			s.ttl = secs
		}
		return err
	}, nil)
	for i, l := range locks {
		l.mu.Lock()
		ended := l.ended
		l.mu.Unlock()
		switch {
		case ended:
			errs[i] = fmt.Errorf("sqllock: refresh %q: %w", l.key, backend.ErrNotHeld)
		case errors.Is(err, errAbandoned):
			errs[i] = fmt.Errorf("sqllock: refresh %q: %w: %w", l.key, backend.ErrUnavailable, err)
		case errors.Is(err, backend.ErrNotHeld):
			errs[i] = fmt.Errorf("sqllock: refresh %q: %w", l.key, err)
		case err != nil && ctx.Err() != nil:
			errs[i] = fmt.Errorf("sqllock: refresh %q: %w: %w", l.key, backend.ErrUnavailable, err)
		case err != nil && m.d.connGone(err):
			errs[i] = fmt.Errorf("sqllock: refresh %q: %w: the session ended: %w", l.key, backend.ErrNotHeld, err)
		case err != nil:
			errs[i] = fmt.Errorf("sqllock: refresh %q: %w", l.key, m.d.classify(err))
		case !held[l.k]:
			errs[i] = fmt.Errorf("sqllock: refresh %q: %w: the session no longer holds its advisory lock", l.key, backend.ErrNotHeld)
		}
	}
	return errs
}

// RefreshAll implements backend.Batcher in session mode: one statement
// per session, whatever the number of locks on it.
func (d *Driver) RefreshAll(ctx context.Context, locks []backend.Lock, ttls []time.Duration) []error {
	errs := make([]error, len(locks))
	if d.sess == nil {
		for i := range errs {
			errs[i] = fmt.Errorf("sqllock: refresh: %w: batch refresh is session mode's", backend.ErrUnsupported)
		}
		return errs
	}
	type group struct {
		locks []*sessLock
		at    []int
		ttl   time.Duration
	}
	groups := map[*session]*group{}
	for i, l := range backend.OwnLocks("sqllock", locks, errs, func(l *sessLock) bool { return l.s.m == d.sess }) {
		if l == nil {
			continue
		}
		g := groups[l.s]
		if g == nil {
			g = &group{}
			groups[l.s] = g
		}
		g.locks, g.at = append(g.locks, l), append(g.at, i)
		g.ttl = max(g.ttl, ttls[i])
	}
	var wg sync.WaitGroup
	for _, g := range groups {
		wg.Go(func() {
			for j, err := range d.sess.refresh(ctx, g.locks, g.ttl) {
				errs[g.at[j]] = err
			}
		})
	}
	wg.Wait()
	return errs
}

// TryAcquireMulti implements backend.Batcher, which session mode declares
// for RefreshAll only (Capabilities.MultiAtomic is false).
func (d *Driver) TryAcquireMulti(context.Context, []backend.Request) ([]backend.Grant, error) {
	return nil, fmt.Errorf("sqllock: acquire several keys: %w: no multi-lock step", backend.ErrUnsupported)
}

var _ backend.Batcher = (*Driver)(nil)

// Release unlocks l's key on its session.
func (l *sessLock) Release(ctx context.Context) error {
	l.mu.Lock()
	if l.ended {
		l.mu.Unlock()
		return fmt.Errorf("sqllock: release %q: %w", l.key, backend.ErrNotHeld)
	}
	l.mu.Unlock()
	s, m := l.s, l.s.m
	var freed bool
	finish := func(park bool) {
		l.mu.Lock()
		l.ended = true
		l.mu.Unlock()
		s.held.Untrack(l)
		m.mu.Lock()
		if m.local[l.k] == l {
			delete(m.local, l.k)
		}
		m.mu.Unlock()
		if s.waiter { // its one lease: the session is free for the next wait
			s.retire(park)
		}
	}
	err := s.run(ctx, func(ctx context.Context, c *sql.Conn) error {
		var err error
		freed, err = m.sd.unlock(ctx, c, l.k)
		return err
	}, func(err error) { finish(err == nil && freed) })
	if errors.Is(err, errAbandoned) {
		return fmt.Errorf("sqllock: release %q: %w: %w", l.key, backend.ErrUnavailable, err) // finished when the statement is
	}
	finish(err == nil && freed)
	switch {
	case errors.Is(err, backend.ErrNotHeld):
		return fmt.Errorf("sqllock: release %q: %w", l.key, err)
	case err != nil && m.d.connGone(err):
		return fmt.Errorf("sqllock: release %q: %w: the session ended: %w", l.key, backend.ErrNotHeld, err)
	case err != nil:
		return fmt.Errorf("sqllock: release %q: %w", l.key, m.d.classify(err))
	case !freed:
		return fmt.Errorf("sqllock: release %q: %w: the session no longer held its advisory lock", l.key, backend.ErrNotHeld)
	}
	return nil
}
