package sqllock

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/distlock/distlock/backend"
)

// One try in session mode: the key claimed in this Driver, then tried on
// its shared session.

// tryMutex takes key on its session if no lease of this Driver holds it
// and the server grants it. A try whose session was closed for idleness
// under it (by a concurrent call's idleEnd) is made again on a new one.
func (m *sessionMode) tryMutex(ctx context.Context, req backend.Request) (backend.Grant, error) {
	g, err := m.tryMutexOnce(ctx, req)
	if errors.Is(err, errIdleSession) {
		return m.tryMutexOnce(ctx, req)
	}
	return g, err
}

// tryMutexOnce is one try of tryMutex.
func (m *sessionMode) tryMutexOnce(ctx context.Context, req backend.Request) (backend.Grant, error) {
	ttl := req.TTL
	if err := m.checkTTL(req.Key, ttl); err != nil {
		return backend.Grant{}, err
	}
	k := advisoryKey(m.space, req.Key)
	m.d.mu.Lock()
	closed := m.d.closed
	m.d.mu.Unlock()
	m.mu.Lock()
	busy := m.local[k] != nil
	m.mu.Unlock()
	if closed {
		return backend.Grant{}, fmt.Errorf("sqllock: acquire %q: %w", req.Key, backend.ErrClosed)
	}
	if busy {
		return backend.Grant{}, backend.NotAcquired(req.Key, 0)
	}
	secs := seconds(ttl)
	s, err := m.session(ctx, m.slot(k), secs)
	if err != nil {
		return backend.Grant{}, fmt.Errorf("sqllock: acquire %q: %w", req.Key, m.d.classify(err))
	}
	l := &sessLock{s: s, key: req.Key, k: k}
	// Claim the key in this Driver first: the server's lock is the
	// session's, and a session's advisory locks stack.
	if !m.claim(l) {
		return backend.Grant{}, backend.NotAcquired(req.Key, 0)
	}
	sent := time.Now()
	tok, ok, err := m.trySession(ctx, l, req.Owner, secs)
	if err != nil {
		if !errors.Is(err, errAbandoned) {
			m.unclaim(l)
		}
		if errors.Is(err, backend.ErrNotHeld) { // the session ended before the statement
			return backend.Grant{}, fmt.Errorf("sqllock: acquire %q: %w: %w", req.Key, backend.ErrUnavailable, err)
		}
		return backend.Grant{}, fmt.Errorf("sqllock: acquire %q: %w", req.Key, m.d.classify(err))
	}
	if !ok {
		m.unclaim(l)
		return backend.Grant{}, backend.NotAcquired(req.Key, 0)
	}
	if tok == 0 {
		_ = l.Release(context.WithoutCancel(ctx))
		return backend.Grant{}, fmt.Errorf("sqllock: acquire %q: fencing counter returned %d", req.Key, tok)
	}
	if err := s.held.Track(l, req.Hooks()); err != nil {
		m.unclaim(l)
		return backend.Grant{}, fmt.Errorf("sqllock: acquire %q: %w: %w", req.Key, backend.ErrUnavailable, err)
	}
	return backend.Grant{Lock: l, Token: tok, ValidFrom: sent}, nil
}

// checkTTL refuses a lease's TTL beyond the server's longest idle
// timeout, which bounds a session's.
func (m *sessionMode) checkTTL(key string, ttl time.Duration) error {
	if ttl > m.d.dia.maxTTL() {
		return fmt.Errorf("sqllock: acquire %q: %w: TTL %v is beyond the server's longest idle timeout (%v)", key, backend.ErrInvalidConfig, ttl, m.d.dia.maxTTL())
	}
	return nil
}

// claim records l as this Driver's lease of its key, unless one holds it
// already.
func (m *sessionMode) claim(l *sessLock) bool {
	m.mu.Lock()
	if m.local[l.k] != nil {
		m.mu.Unlock()
		return false
	}
	m.local[l.k] = l
	m.mu.Unlock()
	return true
}

// unclaim drops l's claim of its key, if the claim is still l's.
func (m *sessionMode) unclaim(l *sessLock) {
	m.mu.Lock()
	if m.local[l.k] == l {
		delete(m.local, l.k)
	}
	m.mu.Unlock()
}

// trySession tries l's key for owner on l's session, one statement that
// first raises the session's idle timeout to secs seconds if that is
// longer; ok is false when another session holds the key. When ctx ends
// first (errAbandoned) the statement goes on: its grant, if it comes, is
// undone, and l's claim dropped.
func (m *sessionMode) trySession(ctx context.Context, l *sessLock, owner string, secs int) (uint64, bool, error) {
	s, k := l.s, l.k
	var tok uint64
	var ok bool
	err := s.run(ctx, func(ctx context.Context, c *sql.Conn) error {
		if q := s.raise(secs); q != "" {
			if _, err := c.ExecContext(ctx, q); err != nil {
				return err
			}
			s.ttl = secs
		}
		var err error
		tok, ok, err = m.sd.acquire(ctx, s, l.key, owner, k)
		return err
	}, func(err error) {
		// The caller gave up: undo a grant that came late.
		if err == nil && ok {
			_ = s.run(context.Background(), func(ctx context.Context, c *sql.Conn) error {
				_, err := m.sd.unlock(ctx, c, k)
				return err
			}, nil)
		}
		m.unclaim(l)
	})
	if err != nil {
		return 0, false, err // tok and ok are the statement's while it goes on
	}
	return tok, ok, nil
}
