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

// mysqlDialect is MySQL and MariaDB over github.com/go-sql-driver/mysql:
// session settings (autocommit off, wait_timeout) sent once per
// connection, values as X'..' literals (literal.go), batches through
// multiStatements with per-statement results, the fencing token from a
// MEMORY live counter on the pinned session over a durable epoch
// (fence.go), KILL QUERY to interrupt a wait.
type mysqlDialect struct{}

func (mysqlDialect) name() string               { return "mysql" }
func (mysqlDialect) maxTTL() time.Duration      { return maxTTL }
func (mysqlDialect) maxLockWait() time.Duration { return maxLockWaitTimeout }

func (mysqlDialect) statements(table string) *statements { return newStatements(table) }

func (mysqlDialect) bind(q string, args ...any) string { return bind(q, args...) }

func (mysqlDialect) begin(q *statements, ttl, lwt int) string {
	if lwt > 0 {
		return bind(q.beginWait, ttl, lwt)
	}
	return bind(q.beginTry, ttl)
}

// maxTTL is the largest wait_timeout MySQL and MariaDB accept (one year);
// a larger value would be silently truncated, ending locks before their
// client-side validity.
const maxTTL = 31536000 * time.Second

// maxLockWaitTimeout is the largest innodb_lock_wait_timeout MySQL and
// MariaDB accept.
const maxLockWaitTimeout = 1073741824 * time.Second

// Server error numbers the driver reacts to.
const (
	errLockWaitTimeout = 1205 // ER_LOCK_WAIT_TIMEOUT; MariaDB also reports NOWAIT conflicts with it
	errDeadlock        = 1213 // ER_LOCK_DEADLOCK
	errInterrupted     = 1317 // ER_QUERY_INTERRUPTED (KILL QUERY)
	errLockNowait      = 3572 // ER_LOCK_NOWAIT (MySQL 8)
	errTableFull       = 1114 // ER_RECORD_FILE_FULL: a MEMORY table reached max_heap_table_size
	errStatementTime   = 1969 // ER_STATEMENT_TIMEOUT: MariaDB's max_statement_time
	errExecutionTime   = 3024 // ER_QUERY_TIMEOUT: MySQL's max_execution_time
)

// serverCode returns the server's error number, or 0 if err did not come
// from the server.
func serverCode(err error) uint16 {
	var me *mysql.MySQLError
	if errors.As(err, &me) {
		return me.Number
	}
	return 0
}

func (mysqlDialect) serverError(err error) bool { return serverCode(err) != 0 }

// conflict reports whether err says the row is locked by another session.
func (mysqlDialect) conflict(err error) bool {
	switch serverCode(err) {
	case errLockWaitTimeout, errLockNowait, errDeadlock:
		return true
	}
	return false
}

// retryWait: a blocking wait ended by the server's lock-wait timeout, a
// deadlock, or a statement time limit (MariaDB's max_statement_time,
// MySQL's max_execution_time, set for the server or the account) goes on
// within the caller's ctx; the limits would otherwise fail every wait
// longer than them.
func (mysqlDialect) retryWait(err error) bool {
	switch serverCode(err) {
	case errLockWaitTimeout, errDeadlock, errStatementTime, errExecutionTime:
		return true
	}
	return false
}

func (mysqlDialect) createRace(err error) bool { return serverCode(err) == errDeadlock }

func (mysqlDialect) connGone(err error) bool {
	switch serverCode(err) {
	case 0:
		return true // network, driver state, ctx: the driver closes the connection
	case 1053, 1927, 2006, 2013: // shutdown, connection killed, gone away, lost
		return true
	case 4031: // ER_CLIENT_INTERACTION_TIMEOUT: MySQL 8.0.24+ says so before closing an idle session (wait_timeout, the lock's TTL)
		return true
	}
	return errors.Is(err, driver.ErrBadConn) || errors.Is(err, mysql.ErrInvalidConn) ||
		errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded)
}

// batching reports whether the *sql.DB's connections accept several
// statements in one round trip (go-sql-driver's multiStatements, as a
// URL-opened Driver sets it), asking the server once, on c. Without it
// every statement is its own round trip. The statements carry their values
// as literals (see bind), so no configuration prepares them. The batches
// are executed through the driver's own connection (sql.Conn.Raw) for the
// per-statement counts of mysql.Result.
func (mysqlDialect) batching(ctx context.Context, d *Driver, c *sql.Conn) (bool, error) {
	switch d.batch.Load() {
	case batchYes:
		return true, nil
	case batchNo:
		return false, nil
	}
	ok, err := probeBatch(ctx, c)
	if err != nil && serverCode(err) == 0 {
		return false, err // not answered: ask again next time
	}
	if ok {
		d.batch.Store(batchYes)
	} else {
		d.batch.Store(batchNo)
	}
	return ok, nil
}

func probeBatch(ctx context.Context, c *sql.Conn) (bool, error) {
	rows, _, err := execBatch(ctx, c, "DO 1; DO 2")
	if err != nil {
		return false, err
	}
	return len(rows) == 2, nil
}

// connID learns the connection's CONNECTION_ID() from the Driver's memory
// or by asking.
func (mysqlDialect) connID(ctx context.Context, lc *lockConn) (uint64, error) {
	if id, ok := lc.d.ids.get(lc.raw); ok {
		return id, nil
	}
	var id uint64
	if err := lc.c.QueryRowContext(ctx, lc.d.q.connID).Scan(&id); err != nil {
		return 0, err
	}
	lc.d.ids.put(lc.raw, id)
	return id, nil
}

// lockOnce sends the locking read, then the live counter's increment,
// which runs only once the row lock is granted (a failed read ends the
// batch) and runs on this session, so it cannot run after the session,
// and with it the lock, is gone. The first call also sends lc.begin, the
// session settings, which outlast rollbacks. When the Driver batches, all
// of it is one round trip; else a blocking wait CALLs the procedure that
// runs both (proc.go), and a NOWAIT attempt sends one statement each
// (MariaDB refuses NOWAIT inside a procedure).
func (mysqlDialect) lockOnce(ctx context.Context, lc *lockConn, key, owner string, nowait bool) (lockResult, error) {
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
		if !nowait && lc.d.proc.Load() != procNo {
			if plr, ok, err := callNext(ctx, lc, key, owner); ok {
				return plr, err
			}
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
	if begin && (err == nil || (mysqlDialect{}).conflict(err)) {
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
		ex, ok := driverConn(dc).(driver.ExecerContext)
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

// token returns the grant's fencing token: the live counter's, or the first
// of a new epoch (fence.go).
func (mysqlDialect) token(ctx context.Context, lc *lockConn, key, owner string, lr lockResult) (uint64, error) {
	if lr.token != 0 {
		return lr.token, nil
	}
	return lc.newEpoch(ctx, key, owner)
}

// cancel interrupts whatever connection id is running with KILL QUERY.
func (mysqlDialect) cancel(ctx context.Context, d *Driver, id uint64) error {
	_, err := d.db.ExecContext(ctx, fmt.Sprintf(d.q.killQuery, id))
	if serverCode(err) == 1094 { // ER_NO_SUCH_THREAD
		return nil
	}
	return err
}

// terminate ends session id (KILL CONNECTION): false if there is no
// such session.
func (mysqlDialect) terminate(ctx context.Context, d *Driver, id uint64) (bool, error) {
	_, err := d.db.ExecContext(ctx, fmt.Sprintf(d.q.killConn, id))
	if serverCode(err) == 1094 { // ER_NO_SUCH_THREAD
		return false, nil
	}
	return err == nil, err
}

func (mysqlDialect) rowExists(ctx context.Context, d *Driver, key string) (bool, error) {
	var one int
	err := d.db.QueryRowContext(ctx, bind(d.q.exists, key)).Scan(&one)
	if errors.Is(err, sql.ErrNoRows) {
		return false, nil
	}
	return err == nil, err
}

// lastGrant reads the live counter table, and when the key has none, the
// durable epoch's (to tell "never locked" from "not known").
func (mysqlDialect) lastGrant(ctx context.Context, d *Driver, key string) (lastGrant, error) {
	var g lastGrant
	var holder uint64
	err := d.db.QueryRowContext(ctx, bind(d.q.liveRow, key)).Scan(&g.token, &g.owner, &holder)
	if err == nil {
		g.exists, g.known, g.holder = true, true, holder
		return g, nil
	}
	if !errors.Is(err, sql.ErrNoRows) {
		return g, err
	}
	// No live counter: never locked, or not since the server restarted
	// (or the counter was evicted). The last token is not known then.
	var epoch uint64
	err = d.db.QueryRowContext(ctx, bind(d.q.fenceRow, key)).Scan(&epoch)
	if errors.Is(err, sql.ErrNoRows) {
		return g, nil // never locked
	}
	g.exists = err == nil
	g.token = 0
	return g, err
}
