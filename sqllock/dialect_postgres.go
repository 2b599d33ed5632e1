package sqllock

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"encoding/hex"
	"fmt"
	"strings"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/stdlib"
)

// pgDialect is PostgreSQL over github.com/jackc/pgx/v5 (its database/sql
// driver, stdlib). Every statement but the fencing counter's goes through
// the connection's own pgconn in the simple query protocol: one round trip
// for a batch of statements, nothing prepared, every result of the batch
// read. Values are decode('..', 'hex') literals; identifiers are
// double-quoted. The fencing counter's statement, on every hand-off's
// path, has parameters and is prepared once per connection (see token).
//
// A lock attempt is one batch: BEGIN; SET LOCAL
// idle_in_transaction_session_timeout to the TTL (and for a blocking
// wait statement_timeout 0 and the lock_timeout of Options); SELECT
// txid_current() ... FOR UPDATE [NOWAIT]. The settings are LOCAL, so the
// session has no state to restore: a released connection (ROLLBACK) is
// as the pool made it. The fencing token is an increment on another
// connection, made once the row lock is granted, which also checks in the
// same statement that the lock's transaction is still in progress; in
// steady state it increments an UNLOGGED counter over a durable per-key
// epoch, so a grant waits for no WAL flush (see token). Release is ROLLBACK: the lock transaction wrote
// nothing, and an abort, unlike a commit of a transaction that locked a
// row, does not wait for the WAL to reach the disk.
type pgDialect struct{}

// pgMaxTimeout is the largest idle_in_transaction_session_timeout and
// lock_timeout PostgreSQL accepts (INT_MAX milliseconds), in whole seconds.
const pgMaxTimeout = 2147483 * time.Second

func (pgDialect) name() string               { return "postgres" }
func (pgDialect) maxTTL() time.Duration      { return pgMaxTimeout }
func (pgDialect) maxLockWait() time.Duration { return pgMaxTimeout }

// begin: PostgreSQL's settings are sent with every locking read (lockOnce).
func (pgDialect) begin(*statements, int, int) string { return "" }

func (pgDialect) batching(context.Context, *Driver, *sql.Conn) (bool, error) { return true, nil }

func (pgDialect) statements(table string) *statements {
	lt := `"` + table + `"`
	ft := `"` + table + FenceSuffix + `"`
	vt := `"` + table + LiveSuffix + `"`
	mt := `"` + table + ModeSuffix + `"`
	return &statements{
		table:    table,
		ddl:      pgTables(table),
		modeRead: fmt.Sprintf("SELECT mode FROM %s WHERE id = 1", mt),
		modeSet:  fmt.Sprintf("INSERT INTO %s (id, mode) VALUES (1, ?) ON CONFLICT (id) DO NOTHING; SELECT mode FROM %s WHERE id = 1", mt, mt),
		// Whether the lock table exists, and whether it has rows (row mode
		// was used on it): an advisory-mode Driver that would record the
		// mode first asks (see checkMode). The name is a validated
		// identifier.
		lockTable: fmt.Sprintf("SELECT to_regclass('%s') IS NOT NULL", lt),
		lockRows:  fmt.Sprintf("SELECT EXISTS (SELECT FROM %s)", lt),
		// txid_current() gives the transaction its id (the row lock does
		// too), which the fencing statement checks is still in progress.
		lockInto:       fmt.Sprintf("SELECT txid_current() FROM %s WHERE name = ? FOR UPDATE", lt),
		lockIntoNowait: fmt.Sprintf("SELECT txid_current() FROM %s WHERE name = ? FOR UPDATE NOWAIT", lt),
		rollback:       "ROLLBACK",
		commit:         "ROLLBACK", // ends the lock transaction, which wrote nothing: no WAL flush
		// bind writes an integer as its digits: '?s' becomes '5s'.
		setIdle:   "SET LOCAL idle_in_transaction_session_timeout = '?s'",
		reset:     "ROLLBACK", // SET LOCAL only: the session keeps no setting of ours
		exists:    fmt.Sprintf("SELECT 1 FROM %s WHERE name = ?", lt),
		ensure:    fmt.Sprintf("INSERT INTO %s (name) VALUES (?) ON CONFLICT DO NOTHING", lt),
		fence:     pgFence(ft, vt),
		fenceRow:  fmt.Sprintf("SELECT token, owner, holder_id FROM %s WHERE name = ?; SELECT 1 FROM %s WHERE name = ?", vt, ft),
		probe:     fmt.Sprintf("BEGIN; SELECT count(*) FROM %s WHERE name = ?; SELECT 1 FROM %s WHERE name = ? FOR UPDATE SKIP LOCKED; ROLLBACK", lt, lt),
		killQuery: "SELECT pg_cancel_backend(?)",
		killConn:  "SELECT pg_terminate_backend(?)",
	}
}

// pgTables is the DDL of table's tables: the lock table, the durable
// fencing epochs, the semaphores' permit slots, the live counters and the
// mode record.
func pgTables(table string) []string {
	lt := `"` + table + `"`
	ft := `"` + table + FenceSuffix + `"`
	vt := `"` + table + LiveSuffix + `"`
	mt := `"` + table + ModeSuffix + `"`
	return []string{
		fmt.Sprintf("CREATE TABLE IF NOT EXISTS %s (\n"+
			"  name bytea NOT NULL PRIMARY KEY\n"+
			")", lt),
		fmt.Sprintf("CREATE TABLE IF NOT EXISTS %s (\n"+
			"  name       bytea NOT NULL PRIMARY KEY,\n"+
			"  token      bigint NOT NULL,\n"+
			"  owner      bytea NOT NULL,\n"+
			"  holder_id  bigint NOT NULL,\n"+
			"  granted_at timestamptz NOT NULL\n"+
			")", ft),
		fmt.Sprintf("CREATE TABLE IF NOT EXISTS %s (\n"+
			"  name bytea NOT NULL,\n"+
			"  slot integer NOT NULL,\n"+
			"  PRIMARY KEY (name, slot)\n"+
			")", `"`+table+SemSuffix+`"`),
		// The live counters: UNLOGGED, so their writes make no WAL and
		// a transaction that writes only them commits without waiting
		// for a WAL flush; crash recovery empties the table (see token).
		fmt.Sprintf("CREATE UNLOGGED TABLE IF NOT EXISTS %s (\n"+
			"  name       bytea NOT NULL PRIMARY KEY,\n"+
			"  token      bigint NOT NULL,\n"+
			"  owner      bytea NOT NULL,\n"+
			"  holder_id  bigint NOT NULL,\n"+
			"  granted_at timestamptz NOT NULL\n"+
			")", vt),
		// The table's mode (see checkMode): one row, written by the
		// first Driver on the table.
		fmt.Sprintf("CREATE TABLE IF NOT EXISTS %s (\n"+
			"  id   integer NOT NULL PRIMARY KEY CHECK (id = 1),\n"+
			"  mode text NOT NULL\n"+
			")", mt),
	}
}

// bind returns q with each ? replaced by the next of args as a PostgreSQL
// literal: a string or []byte as decode('6b6579', 'hex') (a bytea, whatever
// standard_conforming_strings says), an integer in decimal. As for MySQL
// (literal.go), hexadecimal digits and decimal integers are all a value
// can put into the text.
func (pgDialect) bind(q string, args ...any) string { return bindPG(q, args...) }

func bindPG(q string, args ...any) string { return bindWith(q, writeBytea, args) }

// writeBytea writes v as decode('..', 'hex'), a bytea of its bytes.
func writeBytea(b *strings.Builder, v []byte) {
	b.WriteString("decode('")
	b.WriteString(hex.EncodeToString(v))
	b.WriteString("', 'hex')")
}

// pgExec runs q, one or more statements without parameters, on c in the
// simple query protocol (one round trip) and returns every statement's
// result; the error is the first statement's that failed (the server runs
// none after it).
func pgExec(ctx context.Context, c *sql.Conn, q string) ([]*pgconn.Result, error) {
	var res []*pgconn.Result
	err := c.Raw(func(dc any) error {
		sc, ok := driverConn(dc).(*stdlib.Conn)
		if !ok {
			return fmt.Errorf("sqllock: postgres: %T is not a connection of github.com/jackc/pgx/v5/stdlib", dc)
		}
		var err error
		res, err = sc.Conn().PgConn().Exec(ctx, q).ReadAll()
		return err
	})
	return res, err
}

// pgExecDB is pgExec on a connection of d's pool.
func pgExecDB(ctx context.Context, d *Driver, q string) ([]*pgconn.Result, error) {
	c, err := d.conn(ctx)
	if err != nil {
		return nil, err
	}
	res, err := pgExec(ctx, c, q)
	if err != nil && d.connGone(err) {
		_ = c.Raw(func(any) error { return driver.ErrBadConn })
	}
	_ = c.Close()
	return res, err
}

// connID is the session's backend process id, known from the connection's
// start-up (no round trip).
func (pgDialect) connID(_ context.Context, lc *lockConn) (uint64, error) {
	var pid uint32
	err := lc.c.Raw(func(dc any) error {
		sc, ok := driverConn(dc).(*stdlib.Conn)
		if !ok {
			return fmt.Errorf("sqllock: postgres: %T is not a connection of github.com/jackc/pgx/v5/stdlib", dc)
		}
		pid = sc.Conn().PgConn().PID()
		return nil
	})
	return uint64(pid), err
}

// cancel interrupts the statement of backend id with pg_cancel_backend
// (false, with a warning, for a process that no longer exists).
func (pgDialect) cancel(ctx context.Context, d *Driver, id uint64) error {
	_, err := pgExecDB(ctx, d, bindPG(d.q.killQuery, id))
	return err
}

// cancelConn sends PostgreSQL's cancel request for lc's session over a
// new connection to the server (pgconn's CancelRequest, as pgx's own ctx
// handling does), not one of the pool's. It reads only what the
// connection learnt at its start-up (the server's address, the backend's
// process id and secret key), so it may be called while lc's statement
// runs. A connection that is not pgx's (none should be) falls back to
// pg_cancel_backend.
func (p pgDialect) cancelConn(ctx context.Context, lc *lockConn) error {
	sc, ok := driverConn(lc.raw).(*stdlib.Conn)
	if !ok {
		return p.cancel(ctx, lc.d, lc.id)
	}
	return sc.Conn().PgConn().CancelRequest(ctx)
}

// rowExists reads in the simple protocol: database/sql's QueryRow would
// have pgx prepare (and cache) one statement per key.
func (pgDialect) rowExists(ctx context.Context, d *Driver, key string) (bool, error) {
	res, err := pgExecDB(ctx, d, bindPG(d.q.exists, key))
	if err != nil {
		return false, err
	}
	return len(res) == 1 && len(res[0].Rows) == 1, nil
}

// probe reports whether another session holds key's row lock, in one
// round trip that fails on no lock: the row counted, then locked with SKIP
// LOCKED (no row: another session holds it), in a transaction rolled back.
func (pgDialect) probe(ctx context.Context, d *Driver, key string) (bool, error) {
	res, err := pgExecDB(ctx, d, bindPG(d.q.probe, key, key))
	if err != nil {
		return false, err
	}
	if len(res) != 4 || len(res[1].Rows) != 1 || len(res[1].Rows[0]) != 1 {
		return false, fmt.Errorf("sqllock: the probe returned an unexpected result")
	}
	return string(res[1].Rows[0][0]) == "1" && len(res[2].Rows) == 0, nil
}

// terminate ends session id (pg_terminate_backend): false if there is
// no such session.
func (pgDialect) terminate(ctx context.Context, d *Driver, id uint64) (bool, error) {
	res, err := pgExecDB(ctx, d, bindPG(d.q.killConn, id))
	if err != nil {
		return false, err
	}
	return len(res) == 1 && len(res[0].Rows) == 1 && string(res[0].Rows[0][0]) == "t", nil
}

// SQLSTATEs the driver reacts to.
