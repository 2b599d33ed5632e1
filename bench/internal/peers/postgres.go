package peers

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/url"
	"strings"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/distlock/distlock/backend"
	"github.com/distlock/distlock/sqllock"
)

// sessionTable is the lock table of distlock's session-mode rows (a
// table records the one mode it is used in).
const sessionTable = "distlock_bench_session"

// pgForUpdateTable is the PostgreSQL FOR UPDATE peer's table: one row per
// key.
const pgForUpdateTable = "distlock_bench_for_update"

// pgConnString is the libpq URL of u for pgx: the same host, user,
// password and database, and u's sslmode (the peers speak no TLS, see
// For).
func pgConnString(u *backend.URL, rawURL string) string {
	pu := url.URL{Scheme: "postgres", Host: u.HostsWithDefaultPort(5432)[0], Path: u.Path}
	if pass, ok := u.Password(); ok {
		pu.User = url.UserPassword(u.Username(), pass)
	} else if u.Username() != "" {
		pu.User = url.User(u.Username())
	}
	q := url.Values{"sslmode": {"disable"}}
	if m := queryOf(rawURL).Get("sslmode"); m != "" {
		q.Set("sslmode", m)
	}
	pu.RawQuery = q.Encode()
	return pu.String()
}

func postgresStore(u *backend.URL, rawURL string) (*Store, error) {
	cfg, err := pgxpool.ParseConfig(pgConnString(u, rawURL))
	if err != nil {
		return nil, err
	}
	cfg.ConnConfig.ConnectTimeout = 10 * time.Second
	open := func(ctx context.Context, cut *cutter) (*pgxpool.Pool, error) {
		c := cfg.Copy()
		c.ConnConfig.DialFunc = func(ctx context.Context, network, addr string) (net.Conn, error) {
			return cut.dial(ctx, network, addr) // a nil cutter dials plainly, counting round trips
		}
		return pgxpool.NewWithConfig(ctx, c)
	}
	return sqlKit[*pgxpool.Pool]{
		open:  open,
		close: (*pgxpool.Pool).Close,
		lock:  func(pool *pgxpool.Pool) client { return &pgAdvisoryClient{pool: pool} },
		forUpdate: func(ctx context.Context, pool *pgxpool.Pool) (client, error) {
			fu, err := newPgForUpdate(ctx, pool)
			if err != nil {
				return nil, err
			}
			return fu, nil
		},
		fence: pgFence,
		driver: func(ctx context.Context, pool *pgxpool.Pool, o *sqllock.Options) (backend.Driver, error) {
			return sqllock.NewPool(ctx, pool, o)
		},
		selectOne: func(ctx context.Context, pool *pgxpool.Pool) error {
			var n int
			return pool.QueryRow(ctx, "SELECT 1").Scan(&n)
		},
		info:     pgInfo,
		counters: pgCounters,
	}.store(sqlAbout{
		module: "github.com/jackc/pgx/v5",
		lock:   "pg_advisory_lock",
		lockAbout: "SELECT pg_advisory_lock(hashtextextended(key, 0)) on a connection pinned while held, " +
			"SELECT pg_advisory_unlock(...) to release; a pgxpool.Pool with pgx's defaults (statements prepared and cached per connection)",
		forUpdate: "BEGIN; SELECT name FROM " + pgForUpdateTable + " WHERE name = key FOR UPDATE; ... COMMIT (the key's row created beforehand); " +
			"a pgxpool.Pool with pgx's defaults",
		session: "sqllock.NewPool with Options.Session (session-level advisory locks on 2 shared sessions, idle_session_timeout = TTL) " +
			"over a pgxpool.Pool with pgx's defaults, one Locker per pool; lease TTL = the run's TTL",
		fencedForUpdate: "BEGIN; SELECT ... FOR UPDATE as the FOR UPDATE peer, then, held, " +
			"INSERT INTO " + fenceTable + " ... ON CONFLICT DO UPDATE SET token = token + 1 RETURNING token in autocommit on another connection (the token, durable before use); COMMIT releases",
		fencedLock: "pg_advisory_lock as the pg_advisory_lock peer, then, held, the same counter in autocommit on another connection; pg_advisory_unlock releases",
		conns:      "1 (pinned while held)",
		distlock:   "sqllock.NewPool over a pgxpool.Pool with pgx's defaults, one Locker per pool; lease TTL = the run's TTL",
	}), nil
}

func pgInfo(ctx context.Context, pool *pgxpool.Pool) (Info, error) {
	var info Info
	if err := pool.QueryRow(ctx, "SELECT version()").Scan(&info.Version); err != nil {
		return info, err
	}
	if i := strings.Index(info.Version, " on "); i > 0 {
		info.Version = info.Version[:i]
	}
	rows, err := pool.Query(ctx, "SELECT name, setting FROM pg_settings WHERE name IN "+
		"('fsync', 'synchronous_commit', 'wal_sync_method', 'shared_buffers', 'default_transaction_isolation', "+
		"'idle_in_transaction_session_timeout', 'lock_timeout', 'max_connections') ORDER BY name")
	if err != nil {
		return info, err
	}
	defer rows.Close()
	info.Settings, err = settingsOf(rows)
	return info, err
}

// pgCounters reads the server's statistics: requests are the
// transactions committed and rolled back in every database (PostgreSQL
// counts statements only with the pg_stat_statements extension, which a
// stock server does not load; each statement outside BEGIN ... COMMIT is
// a transaction of its own), fsyncs the WAL's flushes to disk
// (pg_stat_wal.wal_sync, PostgreSQL 14 and later). The statistics are
// reported by each session at the end of a transaction, at most once a
// second, or within 10 s once it is idle, and at its exit; they are read
// from a snapshot: pg_stat_clear_snapshot makes every read see the newest.
// Accurate only once the sessions measured have ended (see below).
func pgCounters(ctx context.Context, pool *pgxpool.Pool) (requests, fsyncs float64, err error) {
	conn, err := pool.Acquire(ctx)
	if err != nil {
		return 0, 0, err
	}
	defer conn.Release()
	// An idle session reports its statistics up to 10 s late (PostgreSQL
	// 15's PGSTAT_IDLE_INTERVAL); one that ends reports them as it exits.
	// The comparison closes its client before the last reading: wait (a
	// bounded while) until no other client session is left, so that what
	// they did is counted.
	for deadline := time.Now().Add(time.Second); time.Now().Before(deadline); {
		var others int
		if err := conn.QueryRow(ctx, "SELECT count(*) FROM pg_stat_activity WHERE backend_type = 'client backend' AND pid <> pg_backend_pid()").Scan(&others); err != nil {
			return 0, 0, err
		}
		if others == 0 {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	if _, err := conn.Exec(ctx, "SELECT pg_stat_clear_snapshot()"); err != nil {
		return 0, 0, err
	}
	var xacts, syncs float64
	err = conn.QueryRow(ctx, "SELECT (SELECT sum(xact_commit + xact_rollback) FROM pg_stat_database)::float8, "+
		"(SELECT wal_sync FROM pg_stat_wal)::float8").Scan(&xacts, &syncs)
	if err != nil {
		return 0, 0, fmt.Errorf("PostgreSQL statistics: %w", err)
	}
	return xacts, syncs, nil
}

// pgAdvisoryClient takes PostgreSQL's session-level advisory locks on a
// connection pinned while the lock is held.
type pgAdvisoryClient struct{ pool *pgxpool.Pool }

func (c *pgAdvisoryClient) Acquire(ctx context.Context, key string) (func(context.Context) error, error) {
	conn, err := c.pool.Acquire(ctx)
	if err != nil {
		return nil, err
	}
	if _, err := conn.Exec(ctx, "SELECT pg_advisory_lock(hashtextextended($1, 0))", key); err != nil {
		// A canceled wait may leave the connection unusable: drop it.
		_ = conn.Conn().Close(context.Background())
		conn.Release()
		return nil, err
	}
	return func(ctx context.Context) error {
		defer conn.Release()
		var ok bool
		if err := conn.QueryRow(ctx, "SELECT pg_advisory_unlock(hashtextextended($1, 0))", key).Scan(&ok); err != nil {
			_ = conn.Conn().Close(context.Background())
			return err
		}
		if !ok {
			return errors.New("pg_advisory_unlock: the lock was not held")
		}
		return nil
	}, nil
}

func (c *pgAdvisoryClient) Close() { c.pool.Close() }

// abandon: the unlock fails on the cut connection, which is dropped; the
// server frees the lock when it sees the connection gone.
func (c *pgAdvisoryClient) abandon(release func(context.Context) error) {
	ctx, cancel := context.WithTimeout(context.Background(), releaseTimeout)
	defer cancel()
	_ = release(ctx)
	c.Close()
}

// pgForUpdateClient locks a key's row with SELECT ... FOR UPDATE in a
// transaction; COMMIT releases it.
type pgForUpdateClient struct {
	pool *pgxpool.Pool
	rows map[string]bool // keys whose row this client made sure of
}

func newPgForUpdate(ctx context.Context, pool *pgxpool.Pool) (*pgForUpdateClient, error) {
	_, err := pool.Exec(ctx, "CREATE TABLE IF NOT EXISTS "+pgForUpdateTable+" (name text PRIMARY KEY)")
	if err != nil && !isPgDuplicate(err) { // two clients creating it at once
		pool.Close()
		return nil, err
	}
	return &pgForUpdateClient{pool: pool, rows: map[string]bool{}}, nil
}

// isPgDuplicate reports a concurrent CREATE TABLE IF NOT EXISTS losing
// the race on the catalog (unique_violation on pg_type).
func isPgDuplicate(err error) bool {
	return err != nil && strings.Contains(err.Error(), "SQLSTATE 23505")
}

func (c *pgForUpdateClient) Acquire(ctx context.Context, key string) (func(context.Context) error, error) {
	if !c.rows[key] { // once per key and client, before its first lock
		if _, err := c.pool.Exec(ctx, "INSERT INTO "+pgForUpdateTable+" (name) VALUES ($1) ON CONFLICT DO NOTHING", key); err != nil {
			return nil, err
		}
		c.rows[key] = true
	}
	// The transaction outlives ctx (which bounds the wait only): a lock
	// granted just before ctx ends is still released by COMMIT.
	tx, err := c.pool.Begin(context.WithoutCancel(ctx))
	if err != nil {
		return nil, err
	}
	var name string
	if err := tx.QueryRow(ctx, "SELECT name FROM "+pgForUpdateTable+" WHERE name = $1 FOR UPDATE", key).Scan(&name); err != nil {
		_ = tx.Rollback(context.Background())
		return nil, err
	}
	return func(ctx context.Context) error { return tx.Commit(context.WithoutCancel(ctx)) }, nil
}

func (c *pgForUpdateClient) Close() { c.pool.Close() }

// abandon: COMMIT fails on the cut connection; the server rolls the
// transaction back when it sees the connection gone.
func (c *pgForUpdateClient) abandon(release func(context.Context) error) {
	ctx, cancel := context.WithTimeout(context.Background(), releaseTimeout)
	defer cancel()
	_ = release(ctx)
	c.Close()
}
