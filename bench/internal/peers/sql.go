package peers

import (
	"context"
	"database/sql"
	"fmt"
	"strings"
	"time"

	"github.com/go-sql-driver/mysql"

	"github.com/distlock/distlock/backend"
	"github.com/distlock/distlock/sqllock"
)

// forUpdateTable is the FOR UPDATE peer's table: one row per key.
const forUpdateTable = "distlock_bench_for_update"

func sqlStore(u *backend.URL) (*Store, error) {
	cfg := mysql.NewConfig()
	cfg.User = u.Username()
	cfg.Passwd, _ = u.Password()
	cfg.Net = "tcp"
	cfg.Addr = u.HostsWithDefaultPort(3306)[0]
	cfg.DBName = strings.Trim(u.Path, "/")
	cfg.Timeout = 10 * time.Second
	cfg.Logger = quietSQL{} // a crash's cut connections would be logged on stderr
	open := func(cut *cutter) (*sql.DB, error) {
		c := cfg.Clone()
		c.DialFunc = cut.dial
		conn, err := mysql.NewConnector(c)
		if err != nil {
			return nil, err
		}
		return sql.OpenDB(conn), nil
	}
	return sqlKit[*sql.DB]{
		open:  func(_ context.Context, cut *cutter) (*sql.DB, error) { return open(cut) },
		close: func(db *sql.DB) { _ = db.Close() },
		lock:  func(db *sql.DB) client { return &getLockClient{db: db} },
		forUpdate: func(ctx context.Context, db *sql.DB) (client, error) {
			fu, err := newForUpdate(ctx, db)
			if err != nil {
				return nil, err
			}
			return fu, nil
		},
		fence: mysqlFence,
		driver: func(ctx context.Context, db *sql.DB, o *sqllock.Options) (backend.Driver, error) {
			return sqllock.New(ctx, db, o)
		},
		selectOne: func(ctx context.Context, db *sql.DB) error {
			var n int
			return db.QueryRowContext(ctx, "SELECT 1").Scan(&n)
		},
		info:     sqlInfo,
		counters: sqlCounters,
	}.store(sqlAbout{
		module: "github.com/go-sql-driver/mysql",
		lock:   "GET_LOCK",
		lockAbout: "SELECT GET_LOCK(key, 3600) on a connection pinned while held, DO RELEASE_LOCK(key) to release; " +
			"go-sql-driver's defaults (a statement with an argument is prepared: one more round trip)",
		forUpdate: "BEGIN; SELECT name FROM " + forUpdateTable + " WHERE name = key FOR UPDATE; ... COMMIT (the key's row created beforehand); " +
			"go-sql-driver's defaults (a statement with an argument is prepared: one more round trip)",
		session: "sqllock.New with Options.Session (GET_LOCK on 2 shared sessions, wait_timeout = TTL) " +
			"over a *sql.DB of go-sql-driver with its defaults, one Locker per pool; lease TTL = the run's TTL",
		fencedForUpdate: "BEGIN; SELECT ... FOR UPDATE as the FOR UPDATE peer, then, held, " +
			"INSERT INTO " + fenceTable + " ... ON DUPLICATE KEY UPDATE token = LAST_INSERT_ID(token + 1) in autocommit on another connection (the token, durable before use); COMMIT releases",
		fencedLock: "SELECT GET_LOCK(key, 3600) as the GET_LOCK peer, then, held, the same counter in autocommit on another connection; DO RELEASE_LOCK releases",
		conns:      "1 (pinned while held: the lock row's open transaction)",
		distlock:   "sqllock.New over a *sql.DB of go-sql-driver with its defaults (no multiStatements, no interpolateParams), one Locker per pool; lease TTL = the run's TTL",
	}), nil
}

func sqlInfo(ctx context.Context, db *sql.DB) (Info, error) {
	var info Info
	if err := db.QueryRowContext(ctx, "SELECT CONCAT(VERSION(), ' (', @@version_comment, ')')").Scan(&info.Version); err != nil {
		return info, err
	}
	rows, err := db.QueryContext(ctx, "SHOW GLOBAL VARIABLES WHERE Variable_name IN "+
		"('innodb_flush_log_at_trx_commit', 'sync_binlog', 'log_bin', 'innodb_buffer_pool_size', "+
		"'transaction_isolation', 'tx_isolation', 'innodb_lock_wait_timeout')")
	if err != nil {
		return info, err
	}
	defer rows.Close()
	info.Settings, err = settingsOf(rows)
	return info, err
}

// sqlCounters reads the global status: Questions counts the statements
// clients sent (each of a batch, an executed prepared statement once),
// Com_stmt_prepare the preparations besides; Innodb_data_fsyncs InnoDB's
// flushes.
func sqlCounters(ctx context.Context, db *sql.DB) (requests, fsyncs float64, err error) {
	rows, err := db.QueryContext(ctx, "SHOW GLOBAL STATUS WHERE Variable_name IN ('Questions', 'Com_stmt_prepare', 'Innodb_data_fsyncs')")
	if err != nil {
		return 0, 0, err
	}
	defer rows.Close()
	seen := 0
	for rows.Next() {
		var name string
		var value float64
		if err := rows.Scan(&name, &value); err != nil {
			return 0, 0, err
		}
		seen++
		if name == "Innodb_data_fsyncs" {
			fsyncs = value
		} else {
			requests += value
		}
	}
	if err := rows.Err(); err != nil {
		return 0, 0, err
	}
	if seen != 3 {
		return 0, 0, fmt.Errorf("SHOW GLOBAL STATUS: %d of 3 counters", seen)
	}
	return requests, fsyncs, nil
}

// quietSQL is a mysql.Logger that prints nothing.
type quietSQL struct{}

func (quietSQL) Print(...any) {}

// getLockClient takes MySQL's named user-level locks on a connection
// pinned while the lock is held.
type getLockClient struct{ db *sql.DB }

func (c *getLockClient) Acquire(ctx context.Context, key string) (func(context.Context) error, error) {
	conn, err := c.db.Conn(ctx)
	if err != nil {
		return nil, err
	}
	var got sql.NullInt64
	if err := conn.QueryRowContext(ctx, "SELECT GET_LOCK(?, 3600)", key).Scan(&got); err != nil || got.Int64 != 1 {
		_ = conn.Close()
		if err == nil {
			err = fmt.Errorf("GET_LOCK returned %v", got)
		}
		return nil, err
	}
	return func(ctx context.Context) error {
		defer conn.Close()
		_, err := conn.ExecContext(ctx, "DO RELEASE_LOCK(?)", key)
		return err
	}, nil
}

func (c *getLockClient) Close() { _ = c.db.Close() }

// abandon: the release fails on the cut connection, which the pool then
// drops.
func (c *getLockClient) abandon(release func(context.Context) error) {
	ctx, cancel := context.WithTimeout(context.Background(), releaseTimeout)
	defer cancel()
	_ = release(ctx)
	c.Close()
}

// forUpdateClient locks a key's row with SELECT ... FOR UPDATE in a
// transaction; COMMIT releases it.
type forUpdateClient struct {
	db   *sql.DB
	rows map[string]bool // keys whose row this client made sure of
}

func newForUpdate(ctx context.Context, db *sql.DB) (*forUpdateClient, error) {
	_, err := db.ExecContext(ctx, "CREATE TABLE IF NOT EXISTS "+forUpdateTable+
		" (name VARBINARY(255) NOT NULL PRIMARY KEY) ENGINE=InnoDB")
	if err != nil {
		_ = db.Close()
		return nil, err
	}
	return &forUpdateClient{db: db, rows: map[string]bool{}}, nil
}

func (c *forUpdateClient) Acquire(ctx context.Context, key string) (func(context.Context) error, error) {
	if !c.rows[key] { // once per key and client, before its first lock
		if _, err := c.db.ExecContext(ctx, "INSERT IGNORE INTO "+forUpdateTable+" (name) VALUES (?)", key); err != nil {
			return nil, err
		}
		c.rows[key] = true
	}
	// The transaction outlives ctx (which bounds the wait only): a lock
	// granted just before ctx ends is still released by COMMIT.
	tx, err := c.db.BeginTx(context.WithoutCancel(ctx), nil)
	if err != nil {
		return nil, err
	}
	var name []byte
	if err := tx.QueryRowContext(ctx, "SELECT name FROM "+forUpdateTable+" WHERE name = ? FOR UPDATE", key).Scan(&name); err != nil {
		_ = tx.Rollback()
		return nil, err
	}
	return func(context.Context) error { return tx.Commit() }, nil
}

func (c *forUpdateClient) Close() { _ = c.db.Close() }

// abandon: COMMIT fails on the cut connection, which the pool then drops.
func (c *forUpdateClient) abandon(release func(context.Context) error) {
	_ = release(context.Background())
	c.Close()
}
