package sqllock

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/distlock/distlock/backend"
)

// tryMutex takes req.Key if no other session holds it: it pins a
// connection, turns autocommit off with the session's idle timeout
// (wait_timeout) set to the TTL, and locks the row with SELECT ... FOR
// UPDATE NOWAIT. The transaction stays open until Release.
func (d *Driver) tryMutex(ctx context.Context, req backend.Request) (backend.Grant, error) {
	return d.acquire(ctx, req, false)
}

// waitMutex is TryAcquire without NOWAIT: SELECT ... FOR UPDATE blocks on the
// pinned connection until the holder's transaction ends. A lock-wait timeout (error 1205) rolls back and waits
// again, within ctx. When ctx ends the blocked statement is interrupted
// (KILL QUERY), so no ghost waiter is left to take the lock later.
func (d *Driver) waitMutex(ctx context.Context, req backend.Request) (backend.Grant, error) {
	return d.acquire(ctx, req, true)
}

func (d *Driver) acquire(ctx context.Context, req backend.Request, wait bool) (backend.Grant, error) {
	return d.acquireWith(ctx, req, req.Key, wait, nil, d.dia.token)
}

// lockFunc makes one locking attempt on lc (see dialect.lockOnce).
type lockFunc func(ctx context.Context, lc *lockConn, key, owner string, nowait bool) (lockResult, error)

// tokenFunc returns the fencing token of a grant just won by lc's session
// (see dialect.token).
type tokenFunc func(ctx context.Context, lc *lockConn, key, owner string, lr lockResult) (uint64, error)

// acquireWith is acquire of the lock named name (req.Key for a mutex),
// with the locking attempt lock (nil: the dialect's mutex) and the
// token's source token: the read-write lock's sides (rwlock.go) differ
// from the mutex in those three only. Errors name req.Key.
func (d *Driver) acquireWith(ctx context.Context, req backend.Request, name string, wait bool, lock lockFunc, token tokenFunc) (backend.Grant, error) {
	op := "acquire"
	if wait {
		op = "wait"
	}
	lc, ttl, err := d.pinFor(ctx, op, req, wait)
	if err != nil {
		return backend.Grant{}, err
	}
	lc.lock = lock
	if wait {
		sent, lr, err := lc.waitRow(ctx, name, req.Key, req.Owner)
		if err != nil {
			return backend.Grant{}, err
		}
		return d.granted(ctx, lc, req, name, ttl, sent, lr, token)
	}
	lr, err := lc.lockRow(ctx, ctx, name, req.Owner, true)
	switch {
	case err == nil:
		lc.id = lr.id
		d.ids.put(lc.raw, lc.id)
	case d.dia.conflict(err) && !lr.found:
		if gerr := lc.giveBack(ctx); gerr != nil {
			return backend.Grant{}, fmt.Errorf("sqllock: %s %q: %w", op, req.Key, lc.d.classify(gerr))
		}
		return backend.Grant{}, backend.NotAcquired(req.Key, 0)
	default:
		lc.discard()
		return backend.Grant{}, fmt.Errorf("sqllock: %s %q: %w", op, req.Key, lc.d.classify(err))
	}
	tok, err := token(ctx, lc, name, req.Owner, lr)
	if err != nil {
		lc.discard() // frees the row; a counter may have moved on, which is harmless
		return backend.Grant{}, fmt.Errorf("sqllock: %s %q: fencing token: %w", op, req.Key, lc.d.classify(err))
	}
	// The lease's validity counts from when the locking statement was
	// sent (lr.sent), not from before pin, which may have opened a new
	// connection (connect, authentication, a new server process: on a
	// busy machine, longer than a short TTL). That is safe because the
	// store's bound on the lock starts later than lr.sent:
	//   - nothing was locked before that statement: a spare or a pooled
	//     connection has no transaction open and holds no lock, and an
	//     earlier attempt of lockRow that found no row locked nothing
	//     (and was rolled back);
	//   - the server frees the lock only when the session ends, and the
	//     bound the TTL stands for is the session's idle timeout
	//     (wait_timeout; idle_in_transaction_session_timeout or
	//     idle_session_timeout), of seconds(req.TTL) >= req.TTL, set
	//     before or with the locking statement (lc.begin) and counted
	//     from the end of the session's last statement: no earlier than
	//     the end of the locking statement, which the server received
	//     after lr.sent.
	// So lr.sent + TTL is no later than the earliest moment the server
	// can free the lock on its own. (Other ends of the session, a
	// restart or a KILL, are losses the lease learns of at its next
	// renewal, as for any other grant; the portable layer's drift
	// allowance covers the clocks' rates.) granted uses the same bound for
	// waits.
	return d.grant(lc, req, ttl, tok, lr.sent)
}

// pinFor pins a connection for one acquisition of req and prepares the
// session settings its first locking read sends (none on a spare that has
// them), and returns the idle timeout in seconds.
func (d *Driver) pinFor(ctx context.Context, op string, req backend.Request, wait bool) (*lockConn, int, error) {
	if req.TTL > d.dia.maxTTL() {
		return nil, 0, fmt.Errorf("sqllock: %s %q: %w: TTL %v is beyond the server's longest idle timeout (%v)",
			op, req.Key, backend.ErrInvalidConfig, req.TTL, d.dia.maxTTL())
	}
	lc, err := d.pin(ctx, op, req.Key)
	if err != nil {
		return nil, 0, err
	}
	ttl := seconds(req.TTL)
	lc.beginTTL, lc.beginLWT = ttl, wait && d.lwt > 0
	// A spare whose session has these settings needs none sent.
	lc.begun = lc.sessTTL == ttl && (lc.sessLWT || !lc.beginLWT)
	switch {
	case lc.begun:
		lc.begin = ""
	case lc.beginLWT:
		lc.begin = d.dia.begin(d.q, ttl, d.lwt)
	default:
		lc.begin = d.dia.begin(d.q, ttl, 0)
	}
	if lc.batch, err = d.dia.batching(ctx, d, lc.c); err != nil {
		lc.discard()
		return nil, 0, fmt.Errorf("sqllock: %s %q: %w", op, req.Key, d.classify(err))
	}
	return lc, ttl, nil
}

// granted finishes an acquisition that waited. The lock's lifetime starts
// when the server sent the grant, which the client cannot observe; the
// locking statement's send time (sent) is a safe lower bound, and used as
// Grant.ValidFrom when the wait was short. After a long wait that would cut
// the lease short, a statement sent now marks the start instead.
func (d *Driver) granted(ctx context.Context, lc *lockConn, req backend.Request, name string, ttl int, sent time.Time, lr lockResult, token tokenFunc) (backend.Grant, error) {
	if time.Since(sent) >= req.TTL/freshWait {
		sent = time.Now()
		if _, err := lc.c.ExecContext(ctx, d.bind(d.q.setIdle, ttl)); err != nil {
			lc.discard()
			return backend.Grant{}, fmt.Errorf("sqllock: wait %q: %w", req.Key, lc.d.classify(err))
		}
	}
	tok, err := token(ctx, lc, name, req.Owner, lr)
	if err != nil {
		lc.discard()
		return backend.Grant{}, fmt.Errorf("sqllock: wait %q: fencing token: %w", req.Key, lc.d.classify(err))
	}
	return d.grant(lc, req, ttl, tok, sent)
}

// freshWait: a wait shorter than TTL/freshWait costs the lease at most that
// fraction of its validity, so it needs no extra statement to restart it.
const freshWait = 10

// waitRow blocks until the lock named name is granted or ctx ends, and
// returns when the statement that won it was sent. On error the connection
// has been returned or discarded; errors name key.
func (lc *lockConn) waitRow(ctx context.Context, name, key, owner string) (time.Time, lockResult, error) {
	fail := func(err error) (time.Time, lockResult, error) {
		lc.end(err)
		return time.Time{}, lockResult{}, fmt.Errorf("sqllock: wait %q: %w", key, lc.d.classify(err))
	}
	if err := lc.loadID(ctx); err != nil {
		return fail(err)
	}
	for {
		lr, err := lc.blockingLock(ctx, name, owner)
		switch {
		case err == nil && ctx.Err() == nil:
			return lr.sent, lr, nil
		case err == nil: // won just as the caller gave up: let it go
			lc.end(nil)
			return time.Time{}, lockResult{}, fmt.Errorf("sqllock: wait %q: %w", key, context.Cause(ctx))
		case ctx.Err() != nil && (errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded)):
			// The interruption could not be sent or did not end the
			// statement within killGrace: the statement's own ctx was
			// canceled, which closed the connection. Its error is no
			// news, and not the store's unavailability.
			lc.end(err)
			return time.Time{}, lockResult{}, fmt.Errorf("sqllock: wait %q: %w (not interrupted within %v: its connection was closed)", key, context.Cause(ctx), killGrace)
		case ctx.Err() != nil:
			lc.end(err)
			return time.Time{}, lockResult{}, fmt.Errorf("sqllock: wait %q: %w (%w)", key, context.Cause(ctx), lc.d.classify(err))
		case lr.found: // held, but the live counter failed
			lc.discard()
			return time.Time{}, lockResult{}, fmt.Errorf("sqllock: wait %q: fencing token: %w", key, lc.d.classify(err))
		case lc.d.dia.retryWait(err):
			if _, rerr := lc.c.ExecContext(ctx, lc.d.q.rollback); rerr != nil {
				return fail(rerr)
			}
		default:
			return fail(err)
		}
	}
}

// end returns the connection to the pool if err left it in a known state
// (a statement the server refused or interrupted), else discards it.
func (lc *lockConn) end(err error) {
	if lc.d.connGone(err) {
		lc.discard()
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), killGrace)
	defer cancel()
	_ = lc.giveBack(ctx)
}

// grant wraps a held row lock in a Lock.
func (d *Driver) grant(lc *lockConn, req backend.Request, ttl int, token uint64, validFrom time.Time) (backend.Grant, error) {
	// The session's idle timer restarted at the locking statement: the
	// idle bound counted from now is a little later than the server's,
	// and later than the lease's deadline, counted from validFrom (the
	// locking statement's send time, or earlier). It bounds a refresh the
	// caller gave up on (lock.go).
	confirmed := time.Now()
	l := &lock{conn: lc, key: req.Key, ttl: ttl, confirmed: confirmed, onLost: req.OnLost, sem: make(chan struct{}, 1)}
	// Tracked so that Close can abandon it; that fails once Close began.
	if err := d.held.Track(l, req.Hooks()); err != nil {
		lc.discard()
		return backend.Grant{}, fmt.Errorf("sqllock: acquire %q: %w", req.Key, err)
	}
	return backend.Grant{Lock: l, Token: token, ValidFrom: validFrom}, nil
}
