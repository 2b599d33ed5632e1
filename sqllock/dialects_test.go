package sqllock_test

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"
	"net"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/distlock/distlock"
	"github.com/distlock/distlock/backend"
	"github.com/distlock/distlock/sqllock"
	"github.com/go-sql-driver/mysql"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
)

// The tests of a behaviour every SQL dialect has are written once and run
// for each row of dialects: a database and a mode of the Driver over it.
// A row says how to reach its server, how to open a Driver and a
// user-made client over it, and what the dialect does its own way. Adding
// a dialect or a mode is adding a row (and its bit in rowSet).

// rowSet selects rows of dialects: a test runs for the rows it names.
type rowSet uint

const (
	mysqlProc       rowSet = 1 << iota // MySQL/MariaDB, one statement per round trip, waits CALL the procedure
	mysqlBatched                       // MySQL/MariaDB, multiStatements (as a URL-opened Driver)
	mysqlStatements                    // MySQL/MariaDB, NoProcedure: two statements where a wait would CALL
	pgRow                              // PostgreSQL, row locks
	pgAdvisory                         // PostgreSQL, Options.Advisory (pg_advisory_xact_lock)
	pgSession                          // PostgreSQL, Options.Session (session-level advisory locks on shared sessions)
	mysqlSession                       // MySQL/MariaDB, Options.Session (GET_LOCK on shared sessions)

	allMySQL = mysqlProc | mysqlBatched | mysqlStatements
	allPG    = pgRow | pgAdvisory
	allRows  = allMySQL | allPG
	// sessionRows are session mode's (mutexes only, shared sessions): the
	// conformance suite runs on them; the tests of pinned connections do not.
	sessionRows = pgSession | mysqlSession
)

// dialect is one row: a dialect and a mode of the Driver.
type dialect struct {
	id   rowSet
	db   string // the server's name, the first element of the subtest's name: "mysql", "postgres"
	mode string // the mode's name, the second
	pg   bool   // the server is PostgreSQL, else MariaDB
	m    mode   // MySQL: how statements are sent
	// opts is the row's Options; a test's own are merged into them (see
	// options).
	opts sqllock.Options
	// semaphore: the mode offers semaphores.
	semaphore bool
	// seqBits: the token layout, epoch<<seqBits | seq. The fence row holds
	// the epoch (MySQL), or the epoch's first token less one (PostgreSQL).
	seqBits int
	// restartKeepsLive: a clean restart keeps the live counters
	// (PostgreSQL writes its UNLOGGED tables out at a clean shutdown; a
	// MEMORY table is empty after any restart).
	restartKeepsLive bool
	// deadlock reports whether err is the server's deadlock error.
	deadlock func(err error) bool
	// isCommand reports whether a chunk a client sends starts a command
	// (for the proxy's DropNextReply), not a handshake's packet.
	isCommand func(chunk []byte) bool
	// nativeError, when not nil, reports whether err wraps an error of the
	// dialect's store client (conformance.NativeErrors).
	nativeError func(err error) bool
	// newUserClient opens a Driver as a service does, over a client of
	// the dialect's made by the user that dials addr, with nil Options but
	// table and mode; close closes the client (after the Driver).
	newUserClient func(ctx context.Context, addr string, opts *sqllock.Options) (d backend.Driver, db *sql.DB, close func(), err error)
	// checkPool checks the idle connections of c's pool for what a lock
	// may leave on them (see pool_test.go).
	checkPool func(t *testing.T, c *client)
	// lockWait: TestLockWaitTimeout's timing.
	lockWait lockWait
}

// lockWait is the timing of TestLockWaitTimeout: the holder's hold, longer
// than the server's lock-wait timeout of 1 s, and a caller's deadline past
// one such timeout.
type lockWait struct{ hold, deadline time.Duration }

// The dialects' own ways, which the rows of their modes share.
var (
	mysqlBase = dialect{
		db: "mysql", semaphore: true, seqBits: 24,
		deadlock: func(err error) bool {
			var me *mysql.MySQLError
			return errors.As(err, &me) && me.Number == 1213
		},
		isCommand: isMySQLCommand, nativeError: mysqlNativeError,
		newUserClient: newMySQLUserClient, checkPool: checkMySQLPool,
		lockWait: lockWait{hold: 2500 * time.Millisecond, deadline: 1500 * time.Millisecond},
	}
	postgresBase = dialect{
		db: "postgres", pg: true, semaphore: true, seqBits: 32, restartKeepsLive: true,
		deadlock: func(err error) bool {
			var pe *pgconn.PgError
			return errors.As(err, &pe) && pe.Code == "40P01"
		},
		isCommand: isPGQuery, newUserClient: newPGPoolClient, checkPool: checkPGPool,
		lockWait: lockWait{hold: 1500 * time.Millisecond, deadline: 1200 * time.Millisecond},
	}
)

// dialects are the rows: a dialect's own ways and a mode.
var dialects = []*dialect{
	row(mysqlBase, mysqlProc, "procedure", nil),
	row(mysqlBase, mysqlBatched, "batched", func(d *dialect) { d.m.batch = true }),
	row(mysqlBase, mysqlStatements, "statements", func(d *dialect) { d.m.noProc, d.opts.NoProcedure = true, true }),
	row(postgresBase, pgRow, "row", nil),
	row(postgresBase, pgAdvisory, "advisory", func(d *dialect) {
		d.opts.Advisory, d.opts.Table = true, testAdvisoryTable // a table records the one mode it is used in
		d.semaphore = false                                     // no slot table in advisory mode
	}),
	row(mysqlBase, mysqlSession, "session", func(d *dialect) {
		d.opts.Session, d.opts.Table = true, testSessionTable
		d.semaphore = false // mutexes only
	}),
	row(postgresBase, pgSession, "session", func(d *dialect) {
		d.opts.Session, d.opts.Table = true, testSessionTable
		d.semaphore = false // mutexes only
	}),
}

// row is base in the mode named mode (id), as set makes it; the test
// table unless set names another.
func row(base dialect, id rowSet, mode string, set func(d *dialect)) *dialect {
	d := base
	d.id, d.mode, d.opts.Table = id, mode, testTable
	if set != nil {
		set(&d)
	}
	return &d
}

// eachDialect runs f for each row of set: one subtest per server, run in
// parallel with the other servers' (they share nothing), and in it one
// per row, one after the other (they share the server).
func eachDialect(t *testing.T, set rowSet, f func(t *testing.T, d *dialect)) {
	t.Helper()
	forDialects(t, set, true, f)
}

// eachDialectSerial is eachDialect with the servers' subtests one after
// the other, for tests that load the machine enough to disturb each
// other's timing.
func eachDialectSerial(t *testing.T, set rowSet, f func(t *testing.T, d *dialect)) {
	t.Helper()
	forDialects(t, set, false, f)
}

func forDialects(t *testing.T, set rowSet, parallel bool, f func(t *testing.T, d *dialect)) {
	t.Helper()
	var dbs []string
	rows := map[string][]*dialect{}
	for _, d := range dialects {
		if set&d.id == 0 {
			continue
		}
		if rows[d.db] == nil {
			dbs = append(dbs, d.db)
		}
		rows[d.db] = append(rows[d.db], d)
	}
	if len(dbs) == 0 {
		t.Fatalf("no dialect row in set %b", set)
	}
	for _, db := range dbs {
		t.Run(db, func(t *testing.T) {
			if parallel {
				t.Parallel()
			}
			for _, d := range rows[db] {
				t.Run(d.mode, func(t *testing.T) { f(t, d) })
			}
		})
	}
}

// server returns the row's shared server.
func (d *dialect) server(t *testing.T) *server { return startShared(t, d.pg) }

// table is the row's lock table.
func (d *dialect) table() string { return d.opts.Table }

// options is opts in the row's mode: its table unless opts names one, its
// Advisory and NoProcedure.
func (d *dialect) options(opts sqllock.Options) sqllock.Options {
	if opts.Table == "" {
		opts.Table = d.opts.Table
	}
	opts.Advisory = opts.Advisory || d.opts.Advisory
	opts.Session = opts.Session || d.opts.Session
	opts.NoProcedure = opts.NoProcedure || d.opts.NoProcedure
	return opts
}

// newDriver makes a Driver of the row over its own *sql.DB (newDB's),
// closed when the test ends.
func (d *dialect) newDriver(t *testing.T, s *server, opts sqllock.Options) (*sqllock.Driver, *client) {
	t.Helper()
	c := &client{db: s.newDB(s.addr, d.m.batch)}
	opts = d.options(opts)
	dr, err := sqllock.New(ctxFor(t, 30*time.Second), c.db, &opts)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	t.Cleanup(func() { _ = c.db.Close() })
	t.Cleanup(func() { _ = dr.Close() }) // first: it returns its spare connections
	return dr, c
}

// newLocker makes a Locker over a new Driver of the row, closed when the
// test ends.
func (d *dialect) newLocker(t *testing.T, s *server, ttl time.Duration, opts sqllock.Options) (*distlock.Locker, *client) {
	t.Helper()
	dr, c := d.newDriver(t, s, opts)
	l := distlock.New(dr, distlock.WithDefaultTTL(ttl))
	t.Cleanup(func() { _ = l.Close() })
	return l, c
}

// sql is q, written for MySQL (backquoted names, ? placeholders), in
// the row's dialect.
func (d *dialect) sql(q string) string { return s2pg(d.pg, q) }

func s2pg(pg bool, q string) string {
	if !pg {
		return q
	}
	q = strings.ReplaceAll(q, "`", `"`)
	var b strings.Builder
	n := 0
	for _, r := range q {
		if r == '?' {
			n++
			b.WriteString("$" + strconv.Itoa(n))
			continue
		}
		b.WriteRune(r)
	}
	return b.String()
}

// killHolderIn ends, from an admin connection, the session of key's last
// holder in table (MySQL: KILL CONNECTION; PostgreSQL:
// pg_terminate_backend).
func (s *server) killHolderIn(ctx context.Context, table, key string) error {
	if s.pg {
		var ok bool
		q := `SELECT pg_terminate_backend(holder_id::int) FROM "` + table + sqllock.FenceSuffix + `" WHERE name = $1`
		if err := s.admin.QueryRowContext(ctx, q, []byte(key)).Scan(&ok); err != nil {
			return fmt.Errorf("holder of %q: %w", key, err)
		}
		if !ok {
			return fmt.Errorf("holder of %q: no such session", key)
		}
		return nil
	}
	var id uint64
	q := "SELECT holder_id FROM `" + table + sqllock.LiveSuffix + "` WHERE name = ?"
	if err := s.admin.QueryRowContext(ctx, q, key).Scan(&id); err != nil {
		return fmt.Errorf("holder of %q: %w", key, err)
	}
	_, err := s.admin.ExecContext(ctx, fmt.Sprintf("KILL CONNECTION %d", id))
	return err
}

// killHolder is killHolderIn the test table.
func (s *server) killHolder(ctx context.Context, key string) error {
	return s.killHolderIn(ctx, testTable, key)
}

// killHolder ends the session of key's holder in the row's table.
func (d *dialect) killHolder(ctx context.Context, s *server, key string) error {
	return s.killHolderIn(ctx, d.table(), key)
}

// isMySQLCommand reports whether chunk starts a MySQL command packet.
func isMySQLCommand(chunk []byte) bool {
	const comQuit = 0x01
	return len(chunk) >= 5 && chunk[3] == 0 && chunk[4] != comQuit
}

// isPGQuery reports whether chunk starts a PostgreSQL query message: Query
// ('Q'), Parse ('P') or Bind ('B'), each a type byte and a 4-byte length.
func isPGQuery(chunk []byte) bool {
	return len(chunk) >= 5 && (chunk[0] == 'Q' || chunk[0] == 'P' || chunk[0] == 'B')
}

// mysqlNativeError: a MySQL server error, the driver's connection errors,
// or the network error of its connection.
func mysqlNativeError(err error) bool {
	var merr *mysql.MySQLError
	var nerr net.Error
	return errors.As(err, &merr) || errors.As(err, &nerr) ||
		errors.Is(err, mysql.ErrInvalidConn) || errors.Is(err, driver.ErrBadConn)
}

// newMySQLUserClient: sql.Open("mysql", dsn) with the DSN only (the
// library's defaults: no multiStatements, no read timeout, an unlimited
// pool).
func newMySQLUserClient(ctx context.Context, addr string, opts *sqllock.Options) (backend.Driver, *sql.DB, func(), error) {
	db, err := sql.Open("mysql", mysqlDSN(addr))
	if err != nil {
		return nil, nil, nil, err
	}
	d, err := sqllock.New(ctx, db, opts)
	if err != nil {
		_ = db.Close()
		return nil, nil, nil, err
	}
	return d, db, func() { _ = db.Close() }, nil
}

// newPGPoolClient: a pgx pool (pgxpool.New with the connection string
// only: pgx's defaults but the pool's size) passed to NewPool.
func newPGPoolClient(ctx context.Context, addr string, opts *sqllock.Options) (backend.Driver, *sql.DB, func(), error) {
	// pgx's defaults but the pool's size, which NewPool's doc asks users
	// to set to the locks held at once plus two: the default (4, or the
	// number of CPUs) is below what the conformance stall case holds at
	// once (a mutex, two read-write sides, a multi-lock of two, a
	// leadership term), and an acquisition beyond it waits for a
	// connection for its fencing token until its ctx ends.
	pool, err := pgxpool.New(ctx, pgURL(addr)+"&pool_max_conns=16")
	if err != nil {
		return nil, nil, nil, err
	}
	d, err := sqllock.NewPool(ctx, pool, opts)
	if err != nil {
		pool.Close()
		return nil, nil, nil, err
	}
	return d, nil, func() { closePool(pool) }, nil
}

// closePool closes pool, which waits for its connections to be returned:
// a case that hung with a lock held (the harness closed under it) must
// not hang the harness's Close too, so that wait is bounded.
func closePool(pool *pgxpool.Pool) {
	done := make(chan struct{})
	go func() { pool.Close(); close(done) }()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
	}
}

// dialectRow is the row id, for the tests of one dialect's own behaviour.
func dialectRow(id rowSet) *dialect {
	for _, d := range dialects {
		if d.id == id {
			return d
		}
	}
	panic(fmt.Sprintf("no dialect row %b", id))
}
