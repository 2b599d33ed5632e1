package sqllock

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"
	"time"

	"github.com/go-sql-driver/mysql"
)

// lockResult is the outcome of one locking attempt.
type lockResult struct {
	found bool   // the lock row exists and this session holds its lock
	id    uint64 // the session's CONNECTION_ID()
	token uint64 // the live counter's next token; 0 when a new epoch must start
}

// lockRow takes the lock row's exclusive row lock inside the open
// transaction and moves the key's live token counter on. The row is
// created first if missing, in its own autocommit statement on another
// connection after this transaction is rolled back (so no gap lock is held
// meanwhile, and two first-time lockers never deadlock). ctx bounds the
// locking statement, ectx the creation.
func (lc *lockConn) lockRow(ctx, ectx context.Context, key, owner string, nowait bool) (lockResult, error) {
	for range 3 {
		lr, err := lc.lockOnce(ctx, key, owner, nowait)
		if err != nil || lr.found {
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

// lockOnce sends the locking read, then the live counter's increment,
// which runs only once the row lock is granted (a failed read ends the
// batch) and runs on this session, so it cannot run after the session,
// and with it the lock, is gone. The first call also sends lc.begin, the
// session settings, which outlast rollbacks. When the Driver batches, all
// of it is one round trip; else one statement each.
func (lc *lockConn) lockOnce(ctx context.Context, key, owner string, nowait bool) (lockResult, error) {
	var lr lockResult
	if lc.id == 0 { // a wait has loaded it before: a KILL may read it meanwhile
		if err := lc.loadID(ctx); err != nil {
			return lr, err
		}
	}
	lr.id = lc.id
	begin := !lc.begun
	lc.begun = true
	if begin {
		lc.sessTTL = 0 // unknown until the settings are known to have run
	}
	// The locking read without a result set: its OK packet counts the row.
	q := lc.d.q.lockInto
	if nowait {
		q = lc.d.q.lockIntoNowait
	}
	q = bind(q, key)
	live := bind(lc.d.q.liveNext, owner, key)
	if !lc.batch {
		if begin {
			if _, err := lc.c.ExecContext(ctx, lc.begin); err != nil {
				return lr, err
			}
			lc.setUp()
		}
		res, err := lc.c.ExecContext(ctx, q)
		if err != nil {
			return lr, err
		}
		if n, err := res.RowsAffected(); err != nil || n != 1 {
			return lr, err // no row
		}
		lr.found = true
		res, err = lc.c.ExecContext(ctx, live)
		if err != nil {
			return lr, err
		}
		if n, err := res.RowsAffected(); err != nil || n != 1 {
			return lr, err // no live counter, or at the end of its epoch
		}
		tok, err := res.LastInsertId()
		lr.token = uint64(tok)
		return lr, err
	}
	// One batch: [settings;] locking read; increment, executed for the
	// per-statement counts of their OK packets. If the read finds no row,
	// the increment still runs; it is then discarded (moving a counter on
	// is always safe: only the tokens handed out must come from increments
	// made while holding the lock).
	q += "; " + live
	if begin {
		q = lc.begin + "; " + q
	}
	rows, ids, err := execBatch(ctx, lc.c, q)
	if begin && (err == nil || isConflict(err)) {
		lc.setUp() // the settings ran: a batch stops at its first failed statement
	}
	if err != nil {
		return lr, err
	}
	if len(rows) < 2 {
		return lr, fmt.Errorf("sqllock: a batch of statements returned %d results", len(rows))
	}
	lr.found = rows[len(rows)-2] == 1
	if lr.found && rows[len(rows)-1] == 1 {
		lr.token = uint64(ids[len(ids)-1])
	}
	return lr, nil
}

// execBatch executes q, several statements without parameters, on c, and
// returns each statement's affected rows and insert id (go-sql-driver's
// mysql.Result: database/sql keeps only the last).
func execBatch(ctx context.Context, c *sql.Conn, q string) (rows, ids []int64, err error) {
	err = c.Raw(func(dc any) error {
		ex, ok := dc.(driver.ExecerContext)
		if !ok {
			return fmt.Errorf("sqllock: %T cannot execute statements", dc)
		}
		res, err := ex.ExecContext(ctx, q, nil)
		if err != nil {
			return err
		}
		mr, ok := res.(mysql.Result)
		if !ok {
			return fmt.Errorf("sqllock: %T has no per-statement results", res)
		}
		rows, ids = mr.AllRowsAffected(), mr.AllLastInsertIds()
		return nil
	})
	return rows, ids, err
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
	var one int
	err := d.db.QueryRowContext(ctx, bind(d.q.exists, key)).Scan(&one)
	if err == nil {
		return nil
	}
	if !errors.Is(err, sql.ErrNoRows) {
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
	case err == nil, serverCode(err) == errDeadlock:
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
	c, err := d.db.Conn(ctx)
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
		_, err := c.ExecContext(sctx, bind(d.q.ensure, key))
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
