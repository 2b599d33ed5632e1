package sqllock

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/distlock/distlock/backend"
)

// lock is a held row lock: an open transaction on a pinned connection.
type lock struct {
	conn   *lockConn
	key    string
	onLost func(error)
	// sem serialises statements on the connection; honours ctx. A
	// Refresh's statement holds it until the server answers, also after
	// the caller gave up waiting (see Refresh).
	sem chan struct{}

	// Guarded by sem.
	ttl       int       // the session's idle timeout, seconds; only grows
	confirmed time.Time // when the last statement the server answered was sent
	ended     bool      // released, lost or abandoned: the connection is gone

	mu   sync.Mutex
	stop context.CancelFunc // cancels the statement in flight, or nil
	quit bool               // Release or Close gave up on the statement in flight
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

// idleBound is the earliest time the server may end the lock's session
// for silence: the idle timeout counted from when the last statement it
// answered was sent. The portable layer's deadline for the lease is never
// later. sem is held.
func (l *lock) idleBound() time.Time { return l.confirmed.Add(time.Duration(l.ttl) * time.Second) }

// Refresh is the liveness check: it pings the pinned connection (any
// command restarts the server's idle timer), or raises the session's idle
// timeout when ttl is longer than the current one. If the connection
// fails, the lock is gone with it: the connection is closed, OnLost is
// called, and the error wraps ErrNotHeld.
//
// The statement is not bounded by ctx but by the session's idle bound
// (idleBound): both client libraries close a connection whose statement's
// ctx ends (go-sql-driver/mysql closes it at once; pgx interrupts the read
// and closes it), which would end the session and the lock although the
// server said nothing. So when ctx ends first, Refresh returns an error
// wrapping ErrUnavailable (the lock is in doubt) and the statement goes on
// in the background, still holding the connection: a later Refresh or
// Release waits for it, and if it fails or reaches the idle bound
// unanswered the connection is closed and OnLost is called.
func (l *lock) Refresh(ctx context.Context, ttl time.Duration) error {
	if err := l.enter(ctx); err != nil {
		return fmt.Errorf("sqllock: refresh %q: %w: the client's ctx ended while an earlier statement on the lock's connection was still unanswered (the lock is in doubt): %w",
			l.key, backend.ErrUnavailable, err)
	}
	if l.ended {
		l.leave()
		return fmt.Errorf("sqllock: refresh %q: %w", l.key, backend.ErrNotHeld)
	}
	if ttl > l.conn.d.dia.maxTTL() {
		l.leave()
		return fmt.Errorf("sqllock: refresh %q: %w: TTL %v is beyond the server's longest idle timeout (%v)",
			l.key, backend.ErrInvalidConfig, ttl, l.conn.d.dia.maxTTL())
	}
	bound := l.idleBound()
	sctx, cancel := context.WithDeadline(context.WithoutCancel(ctx), bound)
	l.mu.Lock()
	l.stop = cancel
	quit := l.quit
	l.mu.Unlock()
	if quit {
		cancel() // a Release or Close gave up on the lock before this statement began
	}
	res := make(chan error, 1)
	go func() {
		defer l.leave()
		res <- l.refresh(sctx, ttl, bound)
		l.mu.Lock()
		l.stop = nil
		l.mu.Unlock()
		cancel()
	}()
	select {
	case err := <-res:
		return err
	case <-ctx.Done():
		select {
		case err := <-res:
			return err
		default:
		}
		return fmt.Errorf("sqllock: refresh %q: %w: the client's ctx ended before the server answered (%w); the lock is in doubt, its statement goes on until the session's idle timeout",
			l.key, backend.ErrUnavailable, context.Cause(ctx))
	}
}

// refresh sends Refresh's statement, bounded by ctx (which ends at the
// session's idle bound, or when Release or Close give up on it), and
// records its outcome. sem is held.
func (l *lock) refresh(ctx context.Context, ttl time.Duration, bound time.Time) error {
	var err error
	sent := time.Now()
	if s := seconds(ttl); s > l.ttl {
		if _, err = l.conn.c.ExecContext(ctx, l.conn.d.bind(l.conn.d.q.setIdle, s)); err == nil {
			l.ttl, l.conn.sessTTL = s, s
		}
	} else {
		err = l.conn.c.PingContext(ctx)
	}
	if err == nil {
		l.confirmed = sent
		return nil
	}
	// A failed or abandoned statement leaves the connection closed or in an
	// unknown state: close it, which ends the session and frees the row.
	l.finish()
	l.mu.Lock()
	quit := l.quit
	l.mu.Unlock()
	switch {
	case quit:
		return fmt.Errorf("sqllock: refresh %q: %w: released while the refresh was in flight: %w", l.key, backend.ErrNotHeld, err)
	case ctx.Err() != nil:
		err = fmt.Errorf("sqllock: refresh %q: %w: no answer by the end of the session's idle timeout (%ds, at %s), after which the server may have ended the session; connection closed: %w",
			l.key, backend.ErrNotHeld, l.ttl, bound.Format(time.RFC3339Nano), err)
	default:
		err = fmt.Errorf("sqllock: refresh %q: %w: its connection failed: %w", l.key, backend.ErrNotHeld, err)
	}
	if l.onLost != nil {
		l.onLost(err) // once: an ended lock's Refresh returns before this
	}
	return err
}

// cancelInFlight makes the statement in flight on the connection (a
// Refresh the caller gave up on) return now: its client library then
// closes the connection, which ends the session and frees the lock.
func (l *lock) cancelInFlight() {
	l.mu.Lock()
	l.quit = true
	stop := l.stop
	l.mu.Unlock()
	if stop != nil {
		stop()
	}
}

// Release ends the transaction, freeing the row, and keeps the connection
// as a spare for the next lock or returns it to the pool with autocommit on
// and the session's defaults restored. If that fails the connection is
// closed instead.
func (l *lock) Release(ctx context.Context) error {
	if err := l.enter(ctx); err != nil {
		// A Refresh's statement is still out on the connection: stop it
		// and close the connection once it returned, which frees the lock.
		l.conn.d.held.Untrack(l)
		l.cancelInFlight()
		go l.abandon()
		return fmt.Errorf("sqllock: release %q: %w: a refresh was still unanswered on the lock's connection; it is closed once that returns, and the server frees the lock then: %w",
			l.key, backend.ErrUnavailable, err)
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

// abandon closes the connection of a lock the Driver gives up on (Close,
// or a Release that could not wait), once a statement in flight on it
// returned (made to return at once).
func (l *lock) abandon() {
	l.cancelInFlight()
	l.sem <- struct{}{}
	defer l.leave()
	if !l.ended {
		l.ended = true
		l.conn.discard()
	}
}
