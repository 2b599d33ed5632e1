package sqllock

import (
	"context"
	"database/sql"
	"fmt"
)

// newEpoch starts key's next fencing epoch while this session holds the
// row lock: the durable epoch is bumped in an autocommit statement on
// another connection (committed, so neither a rollback nor a server
// restart undoes it, before any token of the epoch is handed out), then
// the live counter is set to the epoch's first token on the pinned
// connection, whose answer shows that the session, and so the row lock,
// is alive. Every token of earlier epochs is smaller, whatever the live
// counter held before (a restart emptied it, or it was evicted).
func (lc *lockConn) newEpoch(ctx context.Context, key, owner string) (uint64, error) {
	return lc.d.newEpochOn(ctx, lc.c, lc.d.db, key, owner, lc.id)
}

// execer runs a statement: a *sql.DB, a *sql.Conn.
type execer interface {
	ExecContext(ctx context.Context, q string, args ...any) (sql.Result, error)
}

// newEpochOn is newEpoch on c, the connection of session id that holds
// the lock (a pinned connection, or session mode's shared session), with
// the durable epoch's autocommit statement sent on fc (another
// connection of the pool when c is in a transaction; c itself in
// session mode, where it is not).
func (d *Driver) newEpochOn(ctx context.Context, c *sql.Conn, fc execer, key, owner string, id uint64) (uint64, error) {
	e, err := d.fenceOn(ctx, fc, key, owner, id)
	if err != nil {
		return 0, err
	}
	if e >= 1<<(63-seqBits) {
		return 0, fmt.Errorf("sqllock: fencing epoch %d of %q is beyond the largest (%d)", e, key, uint64(1)<<(63-seqBits)-1)
	}
	first := e<<seqBits | 1
	for evicted := false; ; evicted = true {
		res, err := c.ExecContext(ctx, bind(d.q.liveSet, key, first, owner, first, owner))
		switch {
		case err == nil:
			tok, err := res.LastInsertId()
			return uint64(tok), err
		case serverCode(err) == errTableFull && !evicted:
			// Forgetting live counters is always safe: a key without one
			// starts a new epoch at its next grant.
			if _, err := d.db.ExecContext(ctx, d.q.liveEvict); err != nil {
				return 0, err
			}
		case serverCode(err) == errTableFull:
			// No room: the key goes on without a live counter, so its next
			// grant starts another epoch. The session answered: it is
			// alive and holds the lock.
			return first, nil
		default:
			return 0, err
		}
	}
}

// fence increments key's durable fencing epoch in its own autocommit
// statement (committed before any token of the epoch is handed out, so
// neither a rollback of the lock transaction nor a server restart undoes
// it) and records the holder. It runs while the row lock is held, so
// increments are ordered like the holds.
func (d *Driver) fence(ctx context.Context, key, owner string, id uint64) (uint64, error) {
	return d.fenceOn(ctx, d.db, key, owner, id)
}

// fenceOn is fence on c.
func (d *Driver) fenceOn(ctx context.Context, c execer, key, owner string, id uint64) (uint64, error) {
	res, err := c.ExecContext(ctx, bind(d.q.fence, key, owner, id, owner, id))
	if err != nil {
		return 0, err
	}
	n, err := res.LastInsertId()
	if err != nil {
		return 0, err
	}
	if n <= 0 {
		return 0, fmt.Errorf("sqllock: fencing counter returned %d", n)
	}
	return uint64(n), nil
}
