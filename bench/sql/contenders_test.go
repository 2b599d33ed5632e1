package sqlbench

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"fmt"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/distlock/distlock"
	"github.com/distlock/distlock/backend"
	"github.com/distlock/distlock/bench/internal/lockbench"
	"github.com/distlock/distlock/bench/internal/measure"
	"github.com/distlock/distlock/sandbox"
	"github.com/distlock/distlock/sqllock"
)

const table = "bench_locks"

// contenders are the ways to take and free a lock on one key that the
// comparison measures, each against the sandbox server. Each worker (as a
// separate process would) makes its own client, the way users make them:
// sql.Open with go-sql-driver's defaults (no interpolateParams, no
// multiStatements), distlock built with sqllock.New over that *sql.DB.
// SQLBENCH_CONTENDERS, a comma-separated list of names, keeps only those
// (e.g. to profile one: SQLBENCH_CONTENDERS=distlock,"FOR UPDATE").
var contenders = only(contendersAt(func() string { return addr }), os.Getenv("SQLBENCH_CONTENDERS"))

// only returns the libs named in the comma-separated list names (all if
// it is empty).
func only(libs []measure.Library, names string) []measure.Library {
	if names == "" {
		return libs
	}
	keep := strings.Split(names, ",")
	return slices.DeleteFunc(libs, func(l measure.Library) bool { return !slices.Contains(keep, l.Name) })
}

// contendersAt is contenders against the server (or proxy) at at().
func contendersAt(at func() string) []measure.Library {
	lib := func(name string, newClient func(context.Context, string) (measure.Contender, error)) measure.Library {
		return measure.Library{Name: name, Make: func() (measure.Contender, error) { return newClient(context.Background(), at()) }}
	}
	return []measure.Library{
		lib("distlock", newDistlock),
		lib("distlock NoProcedure", newDistlockNoProc),
		lib("distlock URL", newDistlockURL),
		lib("sqllock driver", newDriverOnly),
		lib("FOR UPDATE", newForUpdate),
		lib("FOR UPDATE batched", newForUpdateBatched),
		lib("FOR UPDATE+fence", newForUpdateFence),
		lib("GET_LOCK", newGetLock),
		// EXPERIMENT (proc_test.go): one CALL for the locking read and the
		// counter, and the same pinned client with the two statements.
		lib("proc", newProc),
		lib("pinned 2 stmts", newStmts),
	}
}

// openDefault is a *sql.DB as users open one: sql.Open with a DSN and
// go-sql-driver's defaults (a statement with arguments is prepared on the
// server: COM_STMT_PREPARE, EXECUTE, CLOSE).
func openDefault(addr string) *sql.DB {
	db, err := sql.Open("mysql", sandbox.MySQLDSN(addr))
	if err != nil {
		panic(err)
	}
	return db
}

// distlock: the Locker over sqllock.New with a default *sql.DB (the way
// a user with a pool of their own builds it; the independent comparison
// of issue 17 measured this).
func newDistlock(ctx context.Context, addr string) (measure.Contender, error) {
	return newDistlockWith(ctx, addr, sqllock.Options{Table: table})
}

// distlock NoProcedure: the same without the stored procedure (two
// statements where a wait would CALL it), as an account without CREATE
// ROUTINE gets it: the procedure's effect, measured in the same run.
func newDistlockNoProc(ctx context.Context, addr string) (measure.Contender, error) {
	return newDistlockWith(ctx, addr, sqllock.Options{Table: table, NoProcedure: true})
}

func newDistlockWith(ctx context.Context, addr string, opts sqllock.Options) (measure.Contender, error) {
	db := openDefault(addr)
	d, err := sqllock.New(ctx, db, &opts)
	if err != nil {
		_ = db.Close()
		return nil, err
	}
	l := distlock.New(d, distlock.WithDefaultTTL(30*time.Second))
	return &lockbench.LockerContender{L: l, CloseClient: func() { _ = db.Close() }}, nil
}

// distlock URL: the Locker opened from a URL, whose own pool has
// interpolateParams and multiStatements (statements batched).
func newDistlockURL(ctx context.Context, addr string) (measure.Contender, error) {
	l, err := distlock.Open(ctx, sandbox.MySQLURL(addr)+"?table="+table+"&ttl=30s")
	if err != nil {
		return nil, err
	}
	return &lockbench.LockerContender{L: l}, nil
}

// sqllock driver: the backend alone over a default *sql.DB, without the
// portable Locker (no watchdog, no reentrancy bookkeeping): how much of
// distlock's cost is the store protocol.
type driverClient struct {
	db *sql.DB
	d  *sqllock.Driver
	n  int
}

func newDriverOnly(ctx context.Context, addr string) (measure.Contender, error) {
	db := openDefault(addr)
	d, err := sqllock.New(ctx, db, &sqllock.Options{Table: table})
	if err != nil {
		_ = db.Close()
		return nil, err
	}
	return &driverClient{db: db, d: d}, nil
}

func (c *driverClient) Acquire(ctx context.Context, key string) (func(context.Context) error, error) {
	c.n++
	g, err := c.d.Wait(ctx, backend.Request{Key: key, Owner: fmt.Sprintf("bench-owner-%p-%d", c, c.n), TTL: 30 * time.Second})
	if err != nil {
		return nil, err
	}
	return g.Lock.Release, nil
}

func (c *driverClient) Close() { _ = c.d.Close(); _ = c.db.Close() }

// FOR UPDATE: the bare protocol, BEGIN; SELECT ... FOR UPDATE; COMMIT on
// the same table, with the row created beforehand, over a default
// *sql.DB.
type forUpdateClient struct {
	db   *sql.DB
	rows map[string]bool // keys whose row this client made sure of
}

func newForUpdate(ctx context.Context, addr string) (measure.Contender, error) {
	db := openDefault(addr)
	// distlock has created the table; make sure of it for a run without it.
	_, err := db.ExecContext(ctx, "CREATE TABLE IF NOT EXISTS "+table+" (name VARBINARY(1024) NOT NULL PRIMARY KEY) ENGINE=InnoDB")
	if err != nil {
		_ = db.Close()
		return nil, err
	}
	return &forUpdateClient{db: db, rows: map[string]bool{}}, nil
}

func (c *forUpdateClient) Acquire(ctx context.Context, key string) (func(context.Context) error, error) {
	if !c.rows[key] { // once per key, outside the measured protocol's steady state
		if _, err := c.db.ExecContext(ctx, "INSERT IGNORE INTO "+table+" (name) VALUES (?)", key); err != nil {
			return nil, err
		}
		c.rows[key] = true
	}
	tx, err := c.db.BeginTx(ctx, nil)
	if err != nil {
		return nil, err
	}
	var name []byte
	if err := tx.QueryRowContext(ctx, "SELECT name FROM "+table+" WHERE name = ? FOR UPDATE", key).Scan(&name); err != nil {
		_ = tx.Rollback()
		return nil, err
	}
	return func(context.Context) error { return tx.Commit() }, nil
}

func (c *forUpdateClient) Close() { _ = c.db.Close() }

// FOR UPDATE batched: the bare protocol in two round trips instead of
// three, START TRANSACTION and the locking read sent together
// (a pool with interpolateParams and multiStatements, as a URL-opened
// distlock has), then COMMIT: the strictest baseline.
type forUpdateBatchedClient struct{ *forUpdateClient }

func newForUpdateBatched(ctx context.Context, addr string) (measure.Contender, error) {
	db := openDBWith(addr, true, nil)
	_, err := db.ExecContext(ctx, "CREATE TABLE IF NOT EXISTS "+table+" (name VARBINARY(1024) NOT NULL PRIMARY KEY) ENGINE=InnoDB")
	if err != nil {
		_ = db.Close()
		return nil, err
	}
	return &forUpdateBatchedClient{&forUpdateClient{db: db, rows: map[string]bool{}}}, nil
}

func (c *forUpdateBatchedClient) Acquire(ctx context.Context, key string) (func(context.Context) error, error) {
	if !c.rows[key] {
		if _, err := c.db.ExecContext(ctx, "INSERT IGNORE INTO "+table+" (name) VALUES (?)", key); err != nil {
			return nil, err
		}
		c.rows[key] = true
	}
	conn, err := c.db.Conn(ctx)
	if err != nil {
		return nil, err
	}
	rows, err := conn.QueryContext(ctx, "START TRANSACTION; SELECT name FROM "+table+" WHERE name = ? FOR UPDATE", key)
	if err == nil {
		if !rows.Next() {
			err = fmt.Errorf("no row for %q: %v", key, rows.Err())
		}
		if cerr := rows.Close(); err == nil {
			err = cerr
		}
	}
	if err != nil {
		_ = conn.Raw(func(any) error { return driver.ErrBadConn })
		_ = conn.Close()
		return nil, err
	}
	return func(ctx context.Context) error {
		defer conn.Close()
		_, err := conn.ExecContext(ctx, "COMMIT")
		return err
	}, nil
}

// FOR UPDATE+fence: the bare protocol plus a fencing counter committed
// durably (autocommit, another connection) while the row lock is held: the
// floor for a FOR UPDATE lock that pays one durable commit per grant, as
// sqllock did before its tokens moved to a durable epoch and a live
// counter. Shows what a durable write per grant costs on this server.
func newForUpdateFence(ctx context.Context, addr string) (measure.Contender, error) {
	c, err := newForUpdate(ctx, addr)
	if err != nil {
		return nil, err
	}
	fc := c.(*forUpdateClient)
	_, err = fc.db.ExecContext(ctx, "CREATE TABLE IF NOT EXISTS "+table+"_benchfence (name VARBINARY(1024) NOT NULL PRIMARY KEY, token BIGINT UNSIGNED NOT NULL) ENGINE=InnoDB")
	if err != nil {
		fc.Close()
		return nil, err
	}
	return &forUpdateFenceClient{fc}, nil
}

type forUpdateFenceClient struct{ *forUpdateClient }

func (c *forUpdateFenceClient) Acquire(ctx context.Context, key string) (func(context.Context) error, error) {
	unlock, err := c.forUpdateClient.Acquire(ctx, key)
	if err != nil {
		return nil, err
	}
	res, err := c.db.ExecContext(ctx, "INSERT INTO "+table+"_benchfence (name, token) VALUES (?, LAST_INSERT_ID(1)) "+
		"ON DUPLICATE KEY UPDATE token = LAST_INSERT_ID(token + 1)", key)
	if err == nil {
		_, err = res.LastInsertId()
	}
	if err != nil {
		_ = unlock(ctx)
		return nil, err
	}
	return unlock, nil
}

// GET_LOCK: MySQL's named user-level locks on a pinned connection, over
// a default *sql.DB.
type getLockClient struct{ db *sql.DB }

func newGetLock(_ context.Context, addr string) (measure.Contender, error) {
	return &getLockClient{db: openDefault(addr)}, nil
}

func (c *getLockClient) Acquire(ctx context.Context, key string) (func(context.Context) error, error) {
	conn, err := c.db.Conn(ctx)
	if err != nil {
		return nil, err
	}
	var got sql.NullInt64
	if err := conn.QueryRowContext(ctx, "SELECT GET_LOCK(?, 60)", key).Scan(&got); err != nil || got.Int64 != 1 {
		_ = conn.Close()
		return nil, fmt.Errorf("GET_LOCK: %v %v", got, err)
	}
	return func(ctx context.Context) error {
		defer conn.Close()
		_, err := conn.ExecContext(ctx, "DO RELEASE_LOCK(?)", key)
		return err
	}, nil
}

func (c *getLockClient) Close() { _ = c.db.Close() }
