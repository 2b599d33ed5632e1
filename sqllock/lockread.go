package sqllock

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// lockResult is the outcome of one locking attempt.
type lockResult struct {
	found bool   // the lock row exists and this session holds its lock
	id    uint64 // the session's server id (CONNECTION_ID(), pg_backend_pid())
	token uint64 // MySQL: the live counter's next token; 0 when a new epoch must start
	xid   uint64 // PostgreSQL: the lock transaction's id
	// sent is when the locking statement that won the lock was sent: the
	// start of the lease's validity (see acquireWith).
	sent time.Time
}

// lockRow takes the lock row's exclusive row lock inside the open
// transaction and moves the key's live token counter on. The row is
// created first if missing, in its own autocommit statement on another
// connection after this transaction is rolled back (so no gap lock is held
// meanwhile, and two first-time lockers never deadlock). ctx bounds the
// locking statement, ectx the creation.
func (lc *lockConn) lockRow(ctx, ectx context.Context, key, owner string, nowait bool) (lockResult, error) {
	for range 3 {
		sent := time.Now()
		lr, err := lc.lockOnce(ctx, key, owner, nowait)
		if err != nil || lr.found {
			lr.sent = sent
			return lr, err
		}
		if _, err := lc.c.ExecContext(ctx, lc.d.q.rollback); err != nil {
			return lockResult{}, err
		}
		if err := lc.d.ensure(ectx, key, nowait); err != nil {
			return lockResult{}, err
		}
	}
	return lockResult{}, errNoRow
}

// lockOnce makes one locking attempt: lc.lock's, or the dialect's mutex.
func (lc *lockConn) lockOnce(ctx context.Context, key, owner string, nowait bool) (lockResult, error) {
	if lc.lock != nil {
		return lc.lock(ctx, lc, key, owner, nowait)
	}
	return lc.d.dia.lockOnce(ctx, lc, key, owner, nowait)
}

// blockingLock is lockRow without NOWAIT, honouring ctx: when ctx ends,
// the blocked statement is interrupted with KILL QUERY from another
// connection, so the session stays usable and nothing waits on in the
// server. If the KILL cannot be sent, the statement's own context is
// canceled, which makes the driver close the connection (the server then
// ends the session once it notices). The statement may still have won the
// lock in the meantime: the caller checks ctx and releases it.
func (lc *lockConn) blockingLock(ctx context.Context, key, owner string) (lockResult, error) {
	var lr lockResult
	err := lc.interruptible(ctx, func(sctx context.Context) error {
		var err error
		lr, err = lc.lockRow(sctx, ctx, key, owner, false)
		return err
	}, nil)
	return lr, err
}

// ensureWait bounds the row creation of a NOWAIT acquisition: the INSERT
// waits only if another session created the row and locked it meanwhile,
// and then the locking read that follows reports the conflict.
const ensureWait = 250 * time.Millisecond

// ensure creates key's row if it does not exist. A plain read first (it
// takes no lock and never waits) skips the INSERT when another session has
// created the row meanwhile; the INSERT IGNORE would wait for that
// session's row lock to check the duplicate.
func (d *Driver) ensure(ctx context.Context, key string, nowait bool) error {
	exists, err := d.dia.rowExists(ctx, d, key)
	if err != nil || exists {
		return err
	}
	ictx := ctx
	if nowait {
		var cancel context.CancelFunc
		ictx, cancel = context.WithTimeout(ctx, ensureWait)
		defer cancel()
	}
	err = d.insertRow(ictx, key)
	switch {
	case err == nil, d.dia.createRace(err):
		return nil
	case nowait && ctx.Err() == nil && errors.Is(ictx.Err(), context.DeadlineExceeded):
		return nil // the row exists and is locked: the next locking read says so
	}
	return err
}

// insertRow runs the row's INSERT IGNORE on a connection of its own until
// ctx ends, when the statement is interrupted in the server with KILL
// QUERY: a client that merely hung up would leave it waiting there for the
// row lock, and running (briefly locking the row) just after its holder
// released it.
func (d *Driver) insertRow(ctx context.Context, key string) error {
	return d.insertStmt(ctx, d.bind(d.q.ensure, key))
}

// insertStmt is insertRow for any statement q creating rows.
func (d *Driver) insertStmt(ctx context.Context, q string) error {
	c, err := d.conn(ctx)
	if err != nil {
		return err
	}
	lc := &lockConn{d: d, c: c, raw: rawConn(c)}
	if err := lc.loadID(ctx); err != nil {
		lc.discard()
		return err
	}
	var killed bool
	err = lc.interruptible(ctx, func(sctx context.Context) error {
		_, err := c.ExecContext(sctx, q)
		return err
	}, &killed)
	if killed {
		lc.discard() // a KILL may have come after the statement ended
		if err == nil {
			return nil
		}
		return fmt.Errorf("%w (%w)", context.Cause(ctx), err)
	}
	if err != nil {
		lc.discard()
		return err
	}
	return c.Close()
}
