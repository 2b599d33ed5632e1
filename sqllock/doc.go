// Package sqllock is the MySQL/MariaDB backend of distlock: a lock is the
// exclusive row lock that SELECT ... FOR UPDATE takes on a row of a lock
// table, held by a transaction kept open on a connection pinned for the
// life of the lease.
//
// # URLs
//
//	mysql://user:pass@host:3306/dbname
//	mysql://user:pass@host/dbname?table=app_locks&tls=true&tls_ca=/etc/ssl/db-ca.pem
//
// Parameters: table (default distlock_locks), create_table (default true),
// lock_wait_timeout (a duration; the session's innodb_lock_wait_timeout
// for blocking waits, default the server's), dial_timeout (default 10s),
// tls (false, true, skip-verify or preferred) and tls_ca (a PEM file of CA
// certificates, with tls=true). Unknown parameters are errors. [New] takes
// a *sql.DB of github.com/go-sql-driver/mysql instead.
//
// # Semantics
//
// Two tables: the lock table (name VARBINARY(1024) PRIMARY KEY; keys are
// compared byte for byte) and the fencing counter table (the same name
// plus FenceSuffix). See [DDL] and docs/sql.md.
//
// An acquisition pins a connection, turns autocommit off and sets the
// session's wait_timeout to the TTL (rounded up to whole seconds), then
// locks the row (NOWAIT for TryAcquire, blocking in the server for
// Wait). A missing row is created first in its own autocommit INSERT
// IGNORE, so two first-time lockers never deadlock. Once the row lock is
// held, the key's fencing counter is incremented in an autocommit statement
// on another connection: it is committed before the grant is returned, so
// tokens strictly increase even though the lock transaction itself is
// rolled back or dies.
//
// The lock lives as long as the connection: a holder that dies (process
// killed, connection closed) frees it as soon as the server sees the
// connection end; a holder that goes silent with the TCP connection still
// open (paused, partitioned) frees it when the server's idle timeout
// (wait_timeout = TTL) closes the session. The watchdog's Refresh pings the
// pinned connection, which restarts that timer. Release commits the empty
// transaction by switching autocommit back on, restores the session's
// defaults and returns the connection to the pool; a connection in any
// other state is closed, never pooled.
//
// Locks are not replicated: failing over to a replica loses them all.
//
// # Errors
//
// A key held by another session is a *backend.NotAcquiredError (matching
// ErrNotAcquired). Network failures, timeouts and a killed connection wrap
// ErrUnavailable during an acquisition, and ErrNotHeld for a held lock
// (its connection, and with it the lock, is gone). A closed *sql.DB or
// Driver is ErrClosed. The server's own error (*mysql.MySQLError) is
// wrapped too. Passwords never appear in errors.
package sqllock
