package sqllock

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/distlock/distlock/backend"
)

// mysqlSessionDialect is session mode on MySQL 5.7+ and MariaDB 10.0.2+
// (many named locks per session): GET_LOCK(name, 0) and RELEASE_LOCK on
// the key hashed with the database's and the table's names (lock names
// are global to the server), wait_timeout for the frozen holder. Only
// the session that holds a named lock can release it, so a live session
// holds every lock it took unless it released it; a renewal still asks
// for each (IS_USED_LOCK), in one statement per session.
type mysqlSessionDialect struct{ d *Driver }

func newMySQLSession(ctx context.Context, d *Driver) (*mysqlSessionDialect, string, error) {
	var db sql.NullString
	var version string
	if err := d.db.QueryRowContext(ctx, "SELECT DATABASE(), VERSION()").Scan(&db, &version); err != nil {
		return nil, "", fmt.Errorf("sqllock: session mode: the database's name: %w", d.classify(err))
	}
	if !manyNamedLocks(version) {
		// Before them a session holds one named lock: GET_LOCK of a
		// second name silently frees the first.
		return nil, "", fmt.Errorf("sqllock: %w: session mode needs MySQL 5.7.5+ or MariaDB 10.0.2+ (many GET_LOCK names per session); the server is %s: use row mode", backend.ErrInvalidConfig, version)
	}
	return &mysqlSessionDialect{d: d}, db.String + "." + d.q.table, nil
}

// lockName is k's named lock (at most 64 characters).
func lockName(k int64) string { return fmt.Sprintf("distlock:%016x", uint64(k)) }

// setup: the idle bound, and MariaDB's idle transaction timeouts off as
// for the other modes' sessions (the session is never in a transaction).
func (mysqlSessionDialect) setup(ctx context.Context, c *sql.Conn, ttl int) (uint64, error) {
	if _, err := c.ExecContext(ctx, fmt.Sprintf("SET SESSION wait_timeout = %d", ttl)+noIdleTx); err != nil {
		return 0, err
	}
	var id uint64
	err := c.QueryRowContext(ctx, "SELECT CONNECTION_ID()").Scan(&id)
	return id, err
}

func (mysqlSessionDialect) raise(ttl int) string {
	return fmt.Sprintf("SET SESSION wait_timeout = %d", ttl)
}

// acquire: GET_LOCK, then the live counter's increment on the session
// (autocommit), or a new epoch.
func (m *mysqlSessionDialect) acquire(ctx context.Context, s *session, key, owner string, k int64) (uint64, bool, error) {
	var got sql.NullInt64
	if err := s.c.QueryRowContext(ctx, "SELECT GET_LOCK('"+lockName(k)+"', 0)").Scan(&got); err != nil {
		return 0, false, err
	}
	if !got.Valid {
		return 0, false, errors.New("sqllock: GET_LOCK returned NULL")
	}
	if got.Int64 != 1 {
		return 0, false, nil
	}
	tok, err := m.token(ctx, s, key, owner)
	if err != nil && !m.d.connGone(err) {
		_, _ = m.unlock(ctx, s.c, k)
	}
	return tok, err == nil, err
}

func (m *mysqlSessionDialect) token(ctx context.Context, s *session, key, owner string) (uint64, error) {
	res, err := s.c.ExecContext(ctx, bind(m.d.q.liveNext, owner, key))
	if err != nil {
		return 0, err
	}
	if n, err := res.RowsAffected(); err == nil && n == 1 {
		tok, err := res.LastInsertId()
		return uint64(tok), err
	}
	return m.d.newEpochOn(ctx, s.c, s.c, key, owner, s.pid) // autocommit: the epoch on the session itself
}

func (mysqlSessionDialect) unlock(ctx context.Context, c *sql.Conn, k int64) (bool, error) {
	var freed sql.NullInt64
	err := c.QueryRowContext(ctx, "SELECT RELEASE_LOCK('"+lockName(k)+"')").Scan(&freed)
	return freed.Valid && freed.Int64 == 1, err
}

// check asks, in one statement, whether the session still owns each of
// keys' named locks (IS_USED_LOCK is the owner's connection id): a string
// of one digit per key.
func (mysqlSessionDialect) check(ctx context.Context, c *sql.Conn, raise string, keys []int64) (map[int64]bool, error) {
	if raise != "" {
		if _, err := c.ExecContext(ctx, raise); err != nil {
			return nil, err
		}
	}
	var b strings.Builder
	b.WriteString("SELECT CONCAT(''")
	for i, k := range keys {
		if i%1000 == 0 {
			b.WriteString(", CONCAT(''")
		}
		fmt.Fprintf(&b, ", IS_USED_LOCK('%s') <=> CONNECTION_ID()", lockName(k))
		if i%1000 == 999 || i == len(keys)-1 {
			b.WriteString(")")
		}
	}
	b.WriteString(")")
	var got string
	if err := c.QueryRowContext(ctx, b.String()).Scan(&got); err != nil {
		return nil, err
	}
	if len(got) != len(keys) {
		return nil, fmt.Errorf("sqllock: the session's check returned %d digits for %d locks", len(got), len(keys))
	}
	held := make(map[int64]bool, len(keys))
	for i, k := range keys {
		held[k] = got[i] == '1'
	}
	return held, nil
}

// maxWaitSeconds bounds one GET_LOCK wait; a longer wait repeats it.
const maxWaitSeconds = 60

// hold: the session's settings if new or changed, then GET_LOCK with a
// timeout, kept, in the queue's order, then the token on the session.
// When ctx ends the server's thread is killed as in await, so that it
// never takes the key after the wait gave up.
func (m *mysqlSessionDialect) hold(ctx context.Context, sm *sessionMode, ws *session, prev int, key, owner string, k int64, granted func()) (uint64, error) {
	c := ws.c
	if prev != ws.ttl || ws.pid == 0 {
		id, err := m.setup(ctx, c, ws.ttl)
		if err != nil {
			return 0, err
		}
		ws.pid = id
	}
	n := lockName(k)
	for {
		secs := maxWaitSeconds
		if dl, ok := ctx.Deadline(); ok {
			secs = min(secs, max(1, int(time.Until(dl).Seconds())+1))
		}
		var got sql.NullInt64
		err := c.QueryRowContext(ctx, fmt.Sprintf("SELECT GET_LOCK('%s', %d)", n, secs)).Scan(&got)
		if err != nil {
			if ctx.Err() != nil {
				tctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
				_, _ = sm.d.db.ExecContext(tctx, fmt.Sprintf("KILL CONNECTION %d", ws.pid))
				cancel()
			}
			return 0, err
		}
		if !got.Valid {
			return 0, errors.New("sqllock: GET_LOCK returned NULL")
		}
		if got.Int64 == 1 {
			break
		}
	}
	granted()
	return m.token(ctx, ws, key, owner)
}

// await: GET_LOCK with a timeout, freed at once, in one statement. When
// ctx ends the driver closes its connection, but the server's thread goes
// on waiting: it is killed, so it never takes the key after the wait gave
// up.
func (mysqlSessionDialect) await(ctx context.Context, m *sessionMode, c *sql.Conn, k int64) error {
	var id uint64
	if err := c.QueryRowContext(ctx, "SELECT CONNECTION_ID()").Scan(&id); err != nil {
		return err
	}
	n := lockName(k)
	for {
		secs := maxWaitSeconds
		if dl, ok := ctx.Deadline(); ok {
			secs = min(secs, max(1, int(time.Until(dl).Seconds())+1))
		}
		var got, freed sql.NullInt64
		err := c.QueryRowContext(ctx, fmt.Sprintf("SELECT GET_LOCK('%s', %d), RELEASE_LOCK('%s')", n, secs, n)).Scan(&got, &freed)
		if err != nil {
			if ctx.Err() != nil {
				tctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
				_, _ = m.d.db.ExecContext(tctx, fmt.Sprintf("KILL CONNECTION %d", id))
				cancel()
			}
			return err
		}
		if got.Valid && got.Int64 == 1 {
			return nil
		}
		if !got.Valid {
			return errors.New("sqllock: GET_LOCK returned NULL")
		}
	}
}

func (mysqlSessionDialect) holds(ctx context.Context, d *Driver, k int64) (bool, error) {
	var id sql.NullInt64
	err := d.db.QueryRowContext(ctx, "SELECT IS_USED_LOCK('"+lockName(k)+"')").Scan(&id)
	return id.Valid, err
}

// mysqlSession is the MySQL dialect in session mode.
type mysqlSession struct{ mysqlDialect }

func (mysqlSession) mode() string { return "session" }

// checkModeMySQL records mode in the table's mode record if it has none
// and refuses a Driver of another mode. A table whose mode table is
// missing (made by hand from an earlier DDL) is row mode's: session mode
// refuses it, naming the table to create.
func checkModeMySQL(ctx context.Context, d *Driver, mode string) error {
	mt := d.q.table + ModeSuffix
	var got string
	err := d.db.QueryRowContext(ctx, d.q.modeRead).Scan(&got)
	if serverCode(err) == 1146 { // ER_NO_SUCH_TABLE
		if mode == "row" {
			return nil
		}
		return fmt.Errorf("sqllock: %w: the mode table %q is missing (tables created by hand from an earlier DDL): create it, see DDL and docs/sql.md", backend.ErrInvalidConfig, mt)
	}
	if errors.Is(err, sql.ErrNoRows) {
		if mode != "row" {
			var one int
			e := d.db.QueryRowContext(ctx, "SELECT 1 FROM `"+d.q.table+"` LIMIT 1").Scan(&one)
			if e == nil {
				return fmt.Errorf("sqllock: %w: table %q records no mode and its lock table has rows, so clients in row mode "+
					"(of a version that records no mode) may be running on it; this Driver is in %s mode, and a client of each "+
					"would both hold a key: stop the row-mode clients, then record the mode (INSERT INTO `%s` VALUES (1, '%s')), see docs/sql.md",
					backend.ErrInvalidConfig, d.q.table, mode, mt, mode)
			}
		}
		// Replicas starting at once on a new table all record their mode.
		// Once in a full package run under load (TestConcurrentNew, not
		// reproduced alone in 80 rounds), a replica's INSERT IGNORE
		// returned no error and its SELECT found no row: the record is
		// tried again, a bounded number of times.
		for range 3 {
			if _, err = d.db.ExecContext(ctx, bind(d.q.modeSet, mode)); err == nil {
				err = d.db.QueryRowContext(ctx, d.q.modeRead).Scan(&got)
			}
			if !errors.Is(err, sql.ErrNoRows) {
				break
			}
		}
		if errors.Is(err, sql.ErrNoRows) {
			return fmt.Errorf("sqllock: the table's mode (%s): no row after recording it three times", mt)
		}
	}
	if err != nil {
		return fmt.Errorf("sqllock: the table's mode (%s): %w", mt, d.classify(err))
	}
	if got != mode {
		return fmt.Errorf("sqllock: %w: table %q is used in %s mode (recorded in %q) and this Driver is in %s mode: "+
			"the two lock different things, so a client of each would both hold a key; use one mode per table (docs/sql.md)",
			backend.ErrInvalidConfig, d.q.table, got, mt, mode)
	}
	return nil
}

// manyNamedLocks reports whether a server of VERSION() version holds
// many GET_LOCK names per session: MySQL 5.7.5 and later, MariaDB 10.0.2
// and later.
func manyNamedLocks(version string) bool {
	var a, b, c int
	// The replication protocol's prefix of MariaDB's version.
	_, _ = fmt.Sscanf(strings.TrimPrefix(version, "5.5.5-"), "%d.%d.%d", &a, &b, &c)
	v := a*10000 + b*100 + c
	if strings.Contains(strings.ToLower(version), "mariadb") {
		return v >= 100002
	}
	return v >= 50705
}
