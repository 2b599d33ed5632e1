// Package sqllock is the SQL backend of distlock, for MySQL/MariaDB and
// PostgreSQL: a lock is the exclusive row lock that SELECT ... FOR UPDATE
// takes on a row of a lock table, held by a transaction kept open on a
// connection pinned for the life of the lease.
//
// What is not the database's own (the pinned connection's lifecycle,
// spare connections, waiting and its interruption, liveness by the
// server's idle timeout, the lock handle) is written once; the SQL text,
// literals, error codes, the cancel statement, session settings and the
// fencing counter are each dialect's (dialect_mysql.go,
// dialect_postgres.go and the _postgres.go files beside it). [New] picks
// the dialect from the *sql.DB's driver: github.com/jackc/pgx/v5/stdlib
// is PostgreSQL, github.com/go-sql-driver/mysql MySQL; for a driver it
// does not know (one wrapped by instrumentation such as otelsql) it asks
// the server (SELECT version()), and [Options].Dialect names it outright.
//
// # PostgreSQL
//
//	postgres://user:pass@host:5432/dbname?sslmode=verify-full&sslrootcert=/etc/ssl/db-ca.pem
//	postgresql://...  (the same)
//
// Parameters: table, create_table, lock_wait_timeout (lock_timeout for
// blocking waits) and dial_timeout as for MySQL; mode (row, the default,
// advisory or session, with sessions and waiters); and libpq's sslmode, sslrootcert, sslcert, sslkey and
// application_name, handed to pgx. [New] takes a *sql.DB of pgx's stdlib,
// [NewPool] a *pgxpool.Pool. An acquisition sends BEGIN, SET LOCAL
// idle_in_transaction_session_timeout (the TTL: a holder that goes silent
// loses the lock when the server ends its session) and SELECT ... FOR
// UPDATE [NOWAIT] as one simple-protocol batch on the pinned connection;
// the fencing token, epoch<<32 | seq, comes from one statement on another
// connection, which increments the key's live counter in an UNLOGGED
// table (no WAL flush; crash recovery empties it) and checks that the
// lock's transaction is still in progress; when the key has no live
// counter (first use, after a crash) the same statement commits a new
// durable epoch first. Release is ROLLBACK. Three round trips per
// uncontended pair, no WAL flush in steady state.
// A canceled Wait is interrupted with pg_cancel_backend. In advisory mode
// the lock is pg_advisory_xact_lock on the key hashed to 64 bits, in the
// same kind of transaction. A table is used in one mode: the first Driver
// records it (table+[ModeSuffix]) and New refuses a Driver of the other
// mode with ErrInvalidConfig. On PostgreSQL 17 and later lock
// transactions turn transaction_timeout off. See docs/sql.md.
//
// # Session mode
//
// With mode=session ([Options].Session; PostgreSQL 14+, MySQL 5.7.5+,
// MariaDB 10.0.2+, older servers refused with ErrInvalidConfig) a lease
// is not a transaction on a pinned connection but a session-level
// advisory lock (pg_try_advisory_lock) or a named lock (GET_LOCK) on one
// of Options.Sessions (2) shared connections: any number of leases over
// two connections, where the other modes need one per lease. Each
// session's idle_session_timeout or wait_timeout is the longest TTL of
// its leases, so a frozen holder's locks free within the TTL; a crashed
// holder's free at once; the watchdog renews every lease of a session
// with one statement per round (Capabilities.BatchRefresh). A blocking
// wait runs on a waiter connection of its own (at most Options.Waiters,
// 2), in the server's queue, and keeps the key there when granted (the
// lease lives on that connection, at most Waiters such leases at once;
// beyond them a wait lets the key go and tries it on its session): no
// polling, a contended key handed over in the server's order. Fencing tokens come from the same counter tables,
// the try-lock and the token in one statement on PostgreSQL. Mutexes
// only: semaphores and read-write locks are refused with ErrUnsupported.
// The table records the mode (table+[ModeSuffix], MySQL too). Every
// statement of a Driver goes through its few sessions one at a time, so
// session mode trades throughput for connections: docs/sql.md, Session
// mode.
//
// # MySQL/MariaDB URLs
//
//	mysql://user:pass@host:3306/dbname
//	mysql://user:pass@host/dbname?table=app_locks&tls=true&tls_ca=/etc/ssl/db-ca.pem
//
// Parameters: table (default distlock_locks), create_table (default true),
// lock_wait_timeout (a duration; the session's innodb_lock_wait_timeout
// for blocking waits, default the server's), dial_timeout (default 10s),
// tls (false, true, skip-verify or preferred) and tls_ca (a PEM file of CA
// certificates, with tls=true), mode (row, the default, or session, with
// sessions and waiters). Unknown parameters are errors. A
// URL-opened Driver's pool has multiStatements on, so an uncontended
// acquire+release is two round trips. [New] takes a *sql.DB of
// github.com/go-sql-driver/mysql instead; with the driver's defaults a
// blocking wait's acquire+release is two round trips too, because New
// creates a stored procedure (Table+[ProcSuffix]) that takes the row lock
// and the fencing token in one CALL, and TryAcquire's is three (one per
// statement). Without the privilege to create or execute the procedure,
// or with [Options.NoProcedure], waits send the statements too. Every
// statement carries its values as literals (keys and owners as
// hexadecimal X'..', integers in decimal), so none is prepared on the
// server whatever the pool's interpolateParams.
//
// # Semantics
//
// MySQL: four tables: the lock table (name VARBINARY(1024) PRIMARY KEY; keys are
// compared byte for byte), the durable fencing-epoch table (the same name
// plus [FenceSuffix]), a MEMORY table of live token counters (plus
// [LiveSuffix]) and the semaphores' permit slots (plus [SemSuffix]). See
// [DDL] and docs/sql.md.
//
// An acquisition pins a connection, turns autocommit off and sets the
// session's wait_timeout to the TTL (rounded up to whole seconds), then
// locks the row (NOWAIT for TryAcquire, blocking in the server for
// Wait). A missing row is created first in its own autocommit INSERT
// IGNORE, so two first-time lockers never deadlock.
//
// Fencing tokens are epoch<<24 | seq. Once the row lock is held, the same
// session moves the key's live counter on (a MEMORY table: not
// transactional, so the lock transaction's rollback never undoes it, and
// no durable write). When the key has no live counter (first use, a server
// restart emptied the table, it was evicted) or the counter reached the
// end of its epoch, the key's durable epoch is incremented in an
// autocommit statement on another connection, committed before the grant
// is returned, and the live counter starts at the new epoch's first token.
// So tokens strictly increase across holders, rollbacks and server
// restarts, and the durable commit is paid once per key per server start,
// not per grant.
//
// The lock lives as long as the connection: a holder that dies (process
// killed, connection closed) frees it as soon as the server sees the
// connection end; a holder that goes silent with the TCP connection still
// open (paused, partitioned) frees it when the server's idle timeout
// (wait_timeout = TTL) closes the session. The watchdog's Refresh pings the
// pinned connection, which restarts that timer. Release commits the empty
// transaction and keeps the connection, checked out of the pool, as a
// spare for the next lock, in the lock session's state, so that lock sends
// no session settings; up to 8 spares are kept while the pool has no
// connection limit (SetMaxOpenConns), each for at most 5 s unused. A
// connection goes back to the pool only with autocommit on and the
// session's defaults restored; one in any other state is closed, never
// pooled. Close the Driver before its *sql.DB: Close returns the spares.
//
// Locks are not replicated: failing over to a replica loses them all.
// Tokens stay increasing across a failover only if the replica had
// replicated the counters.
//
// # Semaphores
//
// The Driver grants [backend.Permits] on both dialects (not in advisory
// mode): a semaphore has one row per permit slot in the table named after
// the lock table plus [SemSuffix], and a grant of n permits is n free slot
// rows below the acquirer's limit locked with SELECT ... FOR UPDATE SKIP
// LOCKED ... LIMIT n in an open transaction on a pinned connection, held,
// refreshed and released as a lock is. SKIP LOCKED never waits, so waiters
// poll (Capabilities.Semaphore = poll). Holds at or above the acquirer's
// limit (taken by acquirers with a larger one) are counted before a grant
// stands; see semaphore.go and docs/primitives.md.
//
// # Read-write locks
//
// The Driver grants [backend.Read] and [backend.Write], and queues their
// waiters ([backend.Waiter]), on both dialects, in advisory mode too (Capabilities.RW = queue): a side is held
// by a transaction on a pinned connection as a lock is, on MySQL/MariaDB
// the row of the lock's name locked LOCK IN SHARE MODE (readers) or FOR
// UPDATE (writers), on PostgreSQL the transaction-level advisory lock of
// its hash, shared or exclusive. The server queues a new shared request
// behind a waiting exclusive one, so a waiting writer keeps new readers
// out. A write grant's token is the name's counter in the fence table,
// bumped and committed before the grant returns; a read grant's is that
// counter, the last write's. The read-write lock of a key never meets its
// mutex or semaphore. See rwlock.go and docs/sql.md.
//
// # Errors
//
// A key held by another session is a *backend.NotAcquiredError (matching
// ErrNotAcquired). Network failures, timeouts and a killed connection wrap
// ErrUnavailable during an acquisition, and ErrNotHeld for a held lock
// (its connection, and with it the lock, is gone). A Refresh whose ctx
// ends before the server answers wraps ErrUnavailable (the lock is in
// doubt): its statement goes on, bounded by the session's idle timeout,
// so the client library does not close the lock's connection; the next
// Refresh waits for it. A closed *sql.DB or
// Driver is ErrClosed. A connection the server refuses for its settings
// (a wrong password or user, an unknown database: PostgreSQL SQLSTATE
// class 28 and 3D000, MySQL 1044, 1045, 1049 and the like) wraps
// ErrInvalidConfig, in one line naming the user, host and database. The
// server's own error (*mysql.MySQLError) is
// wrapped too. Passwords never appear in errors.
package sqllock
