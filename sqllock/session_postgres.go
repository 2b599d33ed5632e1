package sqllock

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/stdlib"

	"github.com/distlock/distlock/backend"
)

// pgSessionDialect is session mode on PostgreSQL 14 and later:
// pg_try_advisory_lock on the key hashed with the table's name, the
// fencing counters moved in the same statement, idle_session_timeout for
// the frozen holder, pg_locks for what a session still holds.
type pgSessionDialect struct {
	acquireQ string // try-lock and token, one statement ($1 key, $2 owner, $3 pid, $4 advisory key)
	heldQ    string // the token of a key the session holds: acquireQ without its try-lock
}

func newPGSession(ctx context.Context, d *Driver) (*pgSessionDialect, error) {
	res, err := pgExecDB(ctx, d, "SELECT current_setting('server_version_num')")
	if err != nil {
		return nil, fmt.Errorf("sqllock: session mode: server version: %w", d.classify(err))
	}
	var v int
	if len(res) != 1 || len(res[0].Rows) != 1 {
		return nil, errors.New("sqllock: session mode: server_version_num returned no row")
	}
	if _, err := fmt.Sscan(string(res[0].Rows[0][0]), &v); err != nil {
		return nil, fmt.Errorf("sqllock: session mode: server_version_num %q: %v", res[0].Rows[0][0], err)
	}
	if v < pgMinSessionVersion {
		return nil, fmt.Errorf("sqllock: %w: session mode needs PostgreSQL 14 or later (idle_session_timeout, which frees a frozen holder's locks within the TTL); the server is version %d: use row or advisory mode", backend.ErrInvalidConfig, v)
	}
	f := d.q.fence
	// The fencing statement of the other modes, with the try-lock first:
	// the counters move only if it was granted, and a refusal is a row
	// (0, false).
	for _, r := range [][2]string{
		{"WITH s AS (SELECT set_config('synchronous_commit', 'on', true)), ",
			"WITH k AS (SELECT pg_try_advisory_lock($4::bigint) AS ok), s AS (SELECT set_config('synchronous_commit', 'on', true) FROM k WHERE k.ok), "},
		{"WHERE l.name = $1::bytea AND", "WHERE (SELECT ok FROM k) AND l.name = $1::bytea AND"},
		{"SELECT token, txid_status($4::bigint) FROM u UNION ALL SELECT token, txid_status($4::bigint) FROM n",
			"SELECT token, true FROM u UNION ALL SELECT token, true FROM n UNION ALL SELECT 0, false FROM k WHERE NOT k.ok"},
	} {
		if !strings.Contains(f, r[0]) {
			return nil, fmt.Errorf("sqllock: session mode: the fencing statement has no %q", r[0])
		}
		f = strings.Replace(f, r[0], r[1], 1)
	}
	const try = "pg_try_advisory_lock($4::bigint)"
	if !strings.Contains(f, try) {
		return nil, fmt.Errorf("sqllock: session mode: the acquire statement has no %q", try)
	}
	return &pgSessionDialect{acquireQ: f, heldQ: strings.Replace(f, try, "($4::bigint IS NOT NULL)", 1)}, nil
}

// setup: read committed, so that the fencing statement is never rolled
// back for a serialization failure (which would leave its try-lock
// granted); no idle-in-transaction bound (the session is never idle in
// one).
func (pgSessionDialect) setup(ctx context.Context, c *sql.Conn, ttl int) (uint64, error) {
	_, err := pgExec(ctx, c, pgSetup(ttl))
	return uint64(pgPID(c)), err
}

// pgSetup is the statements that make a connection a session of ttl
// seconds' idle bound.
func pgSetup(ttl int) string {
	return fmt.Sprintf("SET idle_session_timeout = '%ds'; SET idle_in_transaction_session_timeout = 0; SET default_transaction_isolation = 'read committed'", ttl)
}

// pgPID is c's backend process id, known from its start-up (0 if c is
// not a pgx connection).
func pgPID(c *sql.Conn) uint32 {
	var pid uint32
	_ = c.Raw(func(dc any) error {
		if sc, ok := driverConn(dc).(*stdlib.Conn); ok {
			pid = sc.Conn().PgConn().PID()
		}
		return nil
	})
	return pid
}

// hold: pg_advisory_lock and the fencing statement without its try-lock
// (the key being held: a second lock would stack) in one round trip, as
// two statements: in read committed the second one's snapshot is taken
// after the grant, and sees the previous holder's token. A new
// connection's settings take a statement before them. When ctx ends the
// backend is ended as in await, so that it never takes the key after the
// wait gave up.
func (p *pgSessionDialect) hold(ctx context.Context, m *sessionMode, ws *session, prev int, key, owner string, k int64, granted func()) (uint64, error) {
	c := ws.c
	ws.pid = uint64(pgPID(c))
	var q strings.Builder
	switch {
	case prev == 0:
		if _, err := pgExec(ctx, c, pgSetup(ws.ttl)); err != nil {
			return 0, err
		}
	case prev != ws.ttl:
		q.WriteString(p.raise(ws.ttl) + "; ")
	}
	if q.Len() > 0 {
		if _, err := pgExec(ctx, c, q.String()); err != nil {
			return 0, err
		}
	}
	// One batch (one round trip, one implicit transaction) of the
	// driver's prepared statements: planned once per connection, where a
	// simple query would plan the fencing statement each time.
	var tok int64
	var ok bool
	err := c.Raw(func(dc any) error {
		sc, isPgx := driverConn(dc).(*stdlib.Conn)
		if !isPgx {
			return fmt.Errorf("sqllock: postgres: %T is not a connection of github.com/jackc/pgx/v5/stdlib", dc)
		}
		var b pgx.Batch
		b.Queue("SELECT pg_advisory_lock($1::bigint)", k)
		b.Queue(p.heldQ, []byte(key), []byte(owner), int64(ws.pid), int64(1))
		br := sc.Conn().SendBatch(ctx, &b)
		if _, err := br.Exec(); err != nil {
			_ = br.Close()
			return err
		}
		if err := br.QueryRow().Scan(&tok, &ok); err != nil {
			_ = br.Close()
			return err
		}
		return br.Close()
	})
	if err != nil {
		if ctx.Err() != nil && ws.pid != 0 {
			tctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
			_, _ = pgExecDB(tctx, m.d, fmt.Sprintf("SELECT pg_terminate_backend(%d, 4000)", ws.pid))
			cancel()
		}
		return 0, err
	}
	granted()
	if !ok || tok <= 0 {
		return 0, fmt.Errorf("sqllock: fencing counter returned %d", tok)
	}
	return uint64(tok), nil
}

func (pgSessionDialect) raise(ttl int) string {
	return fmt.Sprintf("SET idle_session_timeout = '%ds'", ttl)
}

func (p *pgSessionDialect) acquire(ctx context.Context, s *session, key, owner string, k int64) (uint64, bool, error) {
	var tok int64
	var ok bool
	err := s.c.QueryRowContext(ctx, p.acquireQ, []byte(key), []byte(owner), int64(s.pid), k).Scan(&tok, &ok)
	if err != nil {
		if !s.m.d.connGone(err) {
			// The try-lock may have been granted before the counters
			// failed, and a rollback does not undo a session lock.
			_, _ = p.unlock(ctx, s.c, k)
		}
		return 0, false, err
	}
	if ok && tok <= 0 {
		return 0, true, fmt.Errorf("sqllock: fencing counter returned %d", tok)
	}
	return uint64(tok), ok, nil
}

func (pgSessionDialect) unlock(ctx context.Context, c *sql.Conn, k int64) (bool, error) {
	var freed bool
	err := c.QueryRowContext(ctx, "SELECT pg_advisory_unlock($1::bigint)", k).Scan(&freed)
	return freed, err
}

// pgHeldQ lists the advisory locks (of bigint keys) the session holds.
const pgHeldQ = "SELECT (classid::bigint << 32) | objid::bigint FROM pg_locks WHERE locktype = 'advisory' AND objsubid = 1 AND granted AND pid = pg_backend_pid()"

// check: an advisory lock can be freed behind the lease's back by its
// session (pg_advisory_unlock_all run on it, say), so it lists them.
func (pgSessionDialect) check(ctx context.Context, c *sql.Conn, raise string, _ []int64) (map[int64]bool, error) {
	q := pgHeldQ
	if raise != "" {
		q = raise + "; " + pgHeldQ
	}
	res, err := pgExec(ctx, c, q)
	if err != nil {
		return nil, err
	}
	held := make(map[int64]bool, len(res[len(res)-1].Rows))
	for _, row := range res[len(res)-1].Rows {
		var k int64
		if _, err := fmt.Sscan(string(row[0]), &k); err != nil {
			return nil, err
		}
		held[k] = true
	}
	return held, nil
}

// await: granted in the queue's order, freed at once, in one statement.
// When ctx ends pgx closes its end of the connection, but the server's
// backend does not see that while it waits in the lock's queue: it is
// ended, and await waits for its end (pg_terminate_backend's timeout, 14+),
// so that it never takes the key after the wait gave up.
func (pgSessionDialect) await(ctx context.Context, m *sessionMode, c *sql.Conn, k int64) error {
	var pid uint32
	_ = c.Raw(func(dc any) error {
		if sc, ok := driverConn(dc).(*stdlib.Conn); ok {
			pid = sc.Conn().PgConn().PID()
		}
		return nil
	})
	_, err := pgExec(ctx, c, fmt.Sprintf("SELECT pg_advisory_lock(%d), pg_advisory_unlock(%d)", k, k))
	if err != nil && ctx.Err() != nil && pid != 0 {
		tctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		_, _ = pgExecDB(tctx, m.d, fmt.Sprintf("SELECT pg_terminate_backend(%d, 4000)", pid))
		cancel()
	}
	return err
}

func (pgSessionDialect) holds(ctx context.Context, d *Driver, k int64) (bool, error) {
	u := uint64(k)
	res, err := pgExecDB(ctx, d, fmt.Sprintf("SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND objsubid = 1 AND granted AND classid = %d AND objid = %d", u>>32, u&0xffffffff))
	if err != nil {
		return false, err
	}
	return len(res) == 1 && len(res[0].Rows) == 1 && string(res[0].Rows[0][0]) != "0", nil
}
