package sqllock

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"database/sql"
	"errors"
	"fmt"
	"net"
	"os"
	"strings"
	"sync/atomic"
	"time"

	"github.com/distlock/distlock/backend"
	"github.com/go-sql-driver/mysql"
)

func init() {
	backend.Register("mysql", open)
}

// Options configures a Driver. The zero value is valid.
type Options struct {
	// Dialect names the server's SQL dialect for [New]: "postgres" or
	// "mysql" (MariaDB too). Empty, New tells it from db's driver (pgx's
	// stdlib, go-sql-driver/mysql) or, for a driver it does not know (one
	// wrapped by instrumentation such as otelsql), from the server's
	// SELECT version(); if that tells nothing it refuses db with
	// ErrInvalidConfig, saying what it saw. [NewPool] refuses any but
	// "postgres".
	Dialect string
	// Table is the lock table's name (default [DefaultTable]); the fencing
	// counters live in Table+[FenceSuffix]. Letters, digits and underscores
	// only, at most 58 of them.
	Table string
	// NoCreateTable skips CREATE TABLE IF NOT EXISTS when the Driver is made
	// (for a user without the CREATE privilege; see [DDL]).
	NoCreateTable bool
	// LockWaitTimeout, when positive, sets the session's
	// innodb_lock_wait_timeout (MySQL) or the transaction's lock_timeout
	// (PostgreSQL), whole seconds, at least 1, for blocking waits. A wait that hits it is retried within the caller's ctx; it only
	// bounds how long one server-side wait lasts. Zero keeps the server's.
	LockWaitTimeout time.Duration
	// Advisory (PostgreSQL only; URL mode=advisory) takes
	// pg_advisory_xact_lock on the key hashed to 64 bits instead of a row
	// lock: no lock table, no row per key. A table is used in one mode
	// (recorded by its first Driver in table+[ModeSuffix]): New refuses a
	// Driver of the other mode with ErrInvalidConfig. See docs/sql.md.
	Advisory bool
	// Session (PostgreSQL 14 and later, MySQL 5.7+, MariaDB 10.0.2+; URL
	// mode=session) holds every lease
	// of the Driver as a session-level advisory lock on one of a few
	// shared connections (Sessions): PostgreSQL's session-level advisory
	// locks, MySQL's GET_LOCK; not a transaction on a pinned connection
	// per lease: any number of leases over Sessions+2×Waiters
	// connections (Sessions for leases taken without waiting), renewed by one statement per session per watchdog
	// round. Mutexes only: semaphores and read-write locks are refused
	// with ErrUnsupported. The table records the mode, as for Advisory.
	// See docs/sql.md, Session mode.
	Session bool
	// Sessions bounds the shared connections of session mode (default 2).
	Sessions int
	// Waiters bounds the connections session mode uses at once for
	// blocking waits, one per waiting call (default 2); a wait beyond it
	// waits for one within its ctx. It also bounds the leases kept on the
	// waiter connection that waited for them (a contended key handed over
	// in the server's order): at most Waiters more connections.
	Waiters int
	// NoProcedure (MySQL, MariaDB) keeps the Driver from creating and
	// calling the stored procedure named Table+[ProcSuffix]. By default,
	// over a *sql.DB whose connections send one statement per round trip
	// (no multiStatements), New creates the procedure, and a blocking wait
	// then takes the row lock and its fencing token in one CALL instead of
	// two statements: one round trip fewer while the lock is held, the
	// same guarantees. If the server refuses it (no CREATE ROUTINE
	// privilege, a read-only server, MySQL before 8.0.29), or it cannot be
	// called (no EXECUTE), the Driver sends the two statements. With
	// NoCreateTable the Driver does not create it, but calls it if a DBA
	// did (see [DDL]). A URL-opened Driver batches its statements and
	// needs no procedure. See docs/sql.md.
	NoProcedure bool
	// Server is the server's host:port, which the Driver reports for
	// telemetry (backend.Capabilities.Server: server.address, server.port). A
	// URL-opened Driver sets it from the URL; over a *sql.DB of New it is
	// unknown unless given.
	Server string
}

// open is the backend.Opener for mysql:// URLs. It connects (CREATE TABLE
// IF NOT EXISTS, or a ping with create_table=false) within ctx and
// dial_timeout.
func open(ctx context.Context, u *backend.URL) (backend.Driver, error) {
	cfg, opts, err := configFromURL(u)
	if err != nil {
		return nil, err
	}
	dropTLS := func() {
		if strings.HasPrefix(cfg.TLSConfig, tlsPrefix) {
			mysql.DeregisterTLSConfig(cfg.TLSConfig)
		}
	}
	conn, err := mysql.NewConnector(cfg)
	if err != nil {
		dropTLS()
		return nil, fmt.Errorf("sqllock: %w: %v", backend.ErrInvalidConfig, err)
	}
	opts.Server = cfg.Addr
	// MySQL's error names neither the server nor the database.
	at := func(re *refusedError) *refusedError { return re.at(cfg.User, cfg.Addr, cfg.DBName) }
	d, err := openOwned(ctx, sql.OpenDB(conn), mysqlDialect{}, cfg.Addr, opts, at, "tls_ca")
	if err != nil {
		dropTLS()
		return nil, err
	}
	if strings.HasPrefix(cfg.TLSConfig, tlsPrefix) {
		d.onClose = dropTLS
	}
	return d, nil
}

// openOwned is what both URL openers do with the *sql.DB they made: it
// keeps a pool for held locks, pings the server where New does not dial
// (create_table=false; an error names addr), and makes the Driver over db, its own. Where the
// server's refusal of a login does not name the user, server and
// database, at (nil where it does) names them; caParam is the URL
// parameter of the CA, for the hint about a certificate that was not
// accepted. On an error it closes db.
func openOwned(ctx context.Context, db *sql.DB, dia dialect, addr string, opts Options, at func(*refusedError) *refusedError, caParam string) (*Driver, error) {
	fail := func(err error) (*Driver, error) {
		_ = db.Close()
		return nil, err
	}
	// Each held lock pins a connection; keep enough idle ones that a busy
	// Locker does not dial for every acquisition.
	db.SetMaxIdleConns(64)
	db.SetConnMaxIdleTime(5 * time.Minute)
	if opts.NoCreateTable { // else New's CREATE TABLE dials
		if err := db.PingContext(ctx); err != nil {
			if re := refused(err); re != nil {
				if at != nil {
					re = at(re)
				}
				return fail(fmt.Errorf("sqllock: connect: %w", re))
			}
			return fail(fmt.Errorf("sqllock: connect to %s: %w", addr, classifyWith(dia, err)))
		}
	}
	d, err := newDriver(ctx, db, dia, &opts)
	if re := refused(err); re != nil && at != nil { // newDriver's names no more
		return fail(fmt.Errorf("sqllock: connect: %w", at(re)))
	}
	if err != nil {
		var verr *tls.CertificateVerificationError
		if errors.As(err, &verr) {
			err = fmt.Errorf("%w (the server's certificate was not accepted: check %s, and that the URL's host is a name or address the certificate lists)", err, caParam)
		}
		return fail(err)
	}
	d.ownDB = true
	return d, nil
}

// urlOptions reads the parameters that begin both SQL URLs' Options:
// table, create_table and lock_wait_timeout.
func urlOptions(q *backend.Params, dia dialect) Options {
	var opts Options
	opts.Table = q.String("table", DefaultTable)
	opts.NoCreateTable = !q.Bool("create_table", true)
	opts.LockWaitTimeout = lockWaitParam(q, dia)
	return opts
}

// urlDatabase checks what both SQL URLs name (the table, exactly one
// host, a /DBNAME path) and returns the database's name; u.Query records
// what is wrong.
func urlDatabase(u *backend.URL, table string) string {
	q := u.Query
	if err := checkTable(table); err != nil {
		q.FailValue("table", table, "want letters, digits or underscores (at most 58), not starting with a digit")
	}
	if len(u.Hosts) != 1 {
		q.Fail("want exactly one host, got %d", len(u.Hosts))
	}
	dbname := strings.TrimPrefix(u.Path, "/")
	if dbname == "" || strings.Contains(dbname, "/") {
		q.Fail("path %q: want /DBNAME", u.Path)
	}
	return dbname
}

// configFromURL turns mysql://user:pass@host:port/dbname?... into a driver
// configuration. Its errors never contain the password.
func configFromURL(u *backend.URL) (*mysql.Config, Options, error) {
	q := u.Query
	opts := urlOptions(q, mysqlDialect{})
	opts.Session = q.Enum("mode", "row", "row", "session") == "session"
	// Read in every mode, used in session mode.
	opts.Sessions = q.Int("sessions", 0, 1, 64)
	opts.Waiters = q.Int("waiters", 0, 1, 1024)
	dial := q.Duration("dial_timeout", 10*time.Second)
	tlsMode := q.String("tls", "false")
	tlsCA := q.String("tls_ca", "")
	dbname := urlDatabase(u, opts.Table)
	cfg := mysql.NewConfig()
	cfg.Net = "tcp"
	if len(u.Hosts) == 1 {
		cfg.Addr = u.HostsWithDefaultPort(3306)[0]
	}
	cfg.User = u.Username()
	cfg.Passwd, _ = u.Password()
	cfg.DBName = dbname
	cfg.Timeout = dial
	cfg.InterpolateParams = true // one round trip per statement; values are still bound, escaped by the driver
	cfg.MultiStatements = true   // and one per batch of them: only the Driver's own statements run on this pool
	tlsName, err := tlsConfig(tlsMode, tlsCA, u.Hosts)
	if err != nil {
		q.Fail("%v", err)
	}
	cfg.TLSConfig = tlsName
	if err := q.Err(); err != nil {
		if strings.HasPrefix(tlsName, tlsPrefix) {
			mysql.DeregisterTLSConfig(tlsName)
		}
		return nil, opts, fmt.Errorf("sqllock: %w", err)
	}
	return cfg, opts, nil
}

// lockWaitParam reads lock_wait_timeout, at most the server's maximum
// (which it would cut a longer one down to with only a warning).
func lockWaitParam(q *backend.Params, dia dialect) time.Duration {
	d := q.Duration("lock_wait_timeout", 0)
	if d > dia.maxLockWait() {
		q.FailValue("lock_wait_timeout", q.String("lock_wait_timeout", ""), fmt.Sprintf("want at most %v (the server's maximum lock-wait timeout)", dia.maxLockWait()))
		return 0
	}
	return d
}

// tlsSeq numbers the TLS configurations registered for tls_ca, named
// tlsPrefix+N and deregistered when their Driver closes.
var tlsSeq atomic.Uint64

const tlsPrefix = "distlock-sqllock-"

// tlsConfig returns the driver's TLS setting for tls=... and tls_ca=...
func tlsConfig(mode, caFile string, hosts []string) (string, error) {
	switch mode {
	case "false", "true", "skip-verify", "preferred":
	default:
		return "", fmt.Errorf("parameter tls=%q: want true, false, skip-verify or preferred", mode)
	}
	if caFile == "" {
		return mode, nil
	}
	if mode != "true" {
		return "", fmt.Errorf("parameter tls_ca needs tls=true, not tls=%s", mode)
	}
	pem, err := os.ReadFile(caFile)
	if err != nil {
		return "", fmt.Errorf("parameter tls_ca=%q: %v", caFile, err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(pem) {
		return "", fmt.Errorf("parameter tls_ca=%q: no PEM certificate found", caFile)
	}
	c := &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}
	if len(hosts) == 1 {
		c.ServerName = hosts[0]
		if h, _, err := net.SplitHostPort(hosts[0]); err == nil {
			c.ServerName = h
		}
	}
	name := fmt.Sprintf("%s%d", tlsPrefix, tlsSeq.Add(1))
	if err := mysql.RegisterTLSConfig(name, c); err != nil {
		return "", fmt.Errorf("parameter tls_ca: %v", err)
	}
	return name, nil
}
