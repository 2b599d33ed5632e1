package sqllock

import (
	"context"
	"fmt"
	"time"

	"github.com/distlock/distlock/backend"
)

// lock is a held row lock: an open transaction on a pinned connection.
type lock struct {
	conn   *lockConn
	key    string
	onLost func(error)
	sem    chan struct{} // serialises statements on the connection; honours ctx

	// Guarded by sem.
	ttl   int  // the session's wait_timeout, seconds; only grows
	ended bool // released, lost or abandoned: the connection is gone
}

func (l *lock) enter(ctx context.Context) error {
	select {
	case l.sem <- struct{}{}:
		return nil
	case <-ctx.Done():
		return context.Cause(ctx)
	}
}

func (l *lock) leave() { <-l.sem }

// Refresh is the liveness check: it pings the pinned connection (any
// command restarts the server's idle timer), or raises the session's idle
// timeout when ttl is longer than the current one. If the connection
// fails, the lock is gone with it: the connection is closed, OnLost is
// called, and the error wraps ErrNotHeld.
func (l *lock) Refresh(ctx context.Context, ttl time.Duration) error {
	if err := l.enter(ctx); err != nil {
		return fmt.Errorf("sqllock: refresh %q: %w: %w", l.key, backend.ErrUnavailable, err)
	}
	defer l.leave()
	if l.ended {
		return fmt.Errorf("sqllock: refresh %q: %w", l.key, backend.ErrNotHeld)
	}
	var err error
	if ttl > l.conn.d.dia.maxTTL() {
		return fmt.Errorf("sqllock: refresh %q: %w: TTL %v is beyond the server's longest idle timeout (%v)",
			l.key, backend.ErrInvalidConfig, ttl, l.conn.d.dia.maxTTL())
	}
	if s := seconds(ttl); s > l.ttl {
		if _, err = l.conn.c.ExecContext(ctx, l.conn.d.bind(l.conn.d.q.setIdle, s)); err == nil {
			l.ttl, l.conn.sessTTL = s, s
		}
	} else {
		err = l.conn.c.PingContext(ctx)
	}
	if err == nil {
		return nil
	}
	// A failed or abandoned statement leaves the connection closed or in an
	// unknown state: close it, which ends the session and frees the row.
	l.finish()
	err = fmt.Errorf("sqllock: refresh %q: %w: its connection failed: %w", l.key, backend.ErrNotHeld, err)
	if l.onLost != nil {
		l.onLost(err) // once: an ended lock's Refresh returns before this
	}
	return err
}

// Release ends the transaction, freeing the row, and keeps the connection
// as a spare for the next lock or returns it to the pool with autocommit on
// and the session's defaults restored. If that fails the connection is
// closed instead.
func (l *lock) Release(ctx context.Context) error {
	if err := l.enter(ctx); err != nil {
		return fmt.Errorf("sqllock: release %q: %w: %w", l.key, backend.ErrUnavailable, err)
	}
	defer l.leave()
	l.conn.d.held.Untrack(l)
	if l.ended {
		return fmt.Errorf("sqllock: release %q: %w", l.key, backend.ErrNotHeld)
	}
	l.ended = true
	err := l.conn.giveBack(ctx)
	switch {
	case err == nil:
		return nil
	case ctx.Err() != nil:
		return fmt.Errorf("sqllock: release %q: %w: connection closed, the server frees the lock when it notices: %w",
			l.key, backend.ErrUnavailable, err)
	case l.conn.d.connGone(err):
		return fmt.Errorf("sqllock: release %q: %w: its connection had failed: %w", l.key, backend.ErrNotHeld, err)
	default:
		return nil // the server refused the reset; closing the session released the row
	}
}

// finish closes the connection of a lock that has ended (its Release
// still comes). sem is held.
func (l *lock) finish() {
	l.ended = true
	l.conn.discard()
}

// abandon closes the connection of a lock the Driver gives up on (Close).
func (l *lock) abandon() {
	l.sem <- struct{}{}
	defer l.leave()
	if !l.ended {
		l.ended = true
		l.conn.discard()
	}
}
