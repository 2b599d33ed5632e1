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
// and the server grants it.
func (m *sessionMode) tryMutex(ctx context.Context, req backend.Request) (backend.Grant, error) {
	ttl := req.TTL
	if ttl > m.d.dia.maxTTL() {
		return backend.Grant{}, fmt.Errorf("sqllock: acquire %q: %w: TTL %v is beyond the server's longest idle timeout (%v)", req.Key, backend.ErrInvalidConfig, ttl, m.d.dia.maxTTL())
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
	m.mu.Lock()
	if m.local[k] != nil {
		m.mu.Unlock()
		return backend.Grant{}, backend.NotAcquired(req.Key, 0)
	}
	m.local[k] = l
	m.mu.Unlock()
	unclaim := func() {
		m.mu.Lock()
		if m.local[k] == l {
			delete(m.local, k)
		}
		m.mu.Unlock()
	}
	sent := time.Now()
	var tok uint64
	var ok bool
	err = s.run(ctx, func(ctx context.Context, c *sql.Conn) error {
		if q := s.raise(secs); q != "" {
			if _, err := c.ExecContext(ctx, q); err != nil {
				return err
			}
			s.ttl = secs
		}
		var err error
		tok, ok, err = m.sd.acquire(ctx, s, req.Key, req.Owner, k)
		return err
	}, func(err error) {
		// The caller gave up: undo a grant that came late.
		if err == nil && ok {
			_ = s.run(context.Background(), func(ctx context.Context, c *sql.Conn) error {
				_, err := m.sd.unlock(ctx, c, k)
				return err
			}, nil)
		}
		unclaim()
	})
	if err != nil {
		if !errors.Is(err, errAbandoned) {
			unclaim()
		}
		if errors.Is(err, backend.ErrNotHeld) { // the session ended before the statement
			return backend.Grant{}, fmt.Errorf("sqllock: acquire %q: %w: %w", req.Key, backend.ErrUnavailable, err)
		}
		return backend.Grant{}, fmt.Errorf("sqllock: acquire %q: %w", req.Key, m.d.classify(err))
	}
	if !ok {
		unclaim()
		return backend.Grant{}, backend.NotAcquired(req.Key, 0)
	}
	if tok == 0 {
		_ = l.Release(context.WithoutCancel(ctx))
		return backend.Grant{}, fmt.Errorf("sqllock: acquire %q: fencing counter returned %d", req.Key, tok)
	}
	if err := s.held.Track(l, req.Hooks()); err != nil {
		unclaim()
		return backend.Grant{}, fmt.Errorf("sqllock: acquire %q: %w: %w", req.Key, backend.ErrUnavailable, err)
	}
	return backend.Grant{Lock: l, Token: tok, ValidFrom: sent}, nil
}
