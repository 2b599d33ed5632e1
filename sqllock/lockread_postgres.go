package sqllock

import (
	"context"
	"fmt"
	"strconv"
	"strings"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/stdlib"
)

// PostgreSQL's locking read (lockread.go): BEGIN, the transaction's
// settings and SELECT ... FOR UPDATE [NOWAIT] sent as one batch.

// lockOnce opens a transaction, sets its idle timeout (and for a blocking
// wait its lock-wait bounds) and runs the locking read, in one round trip.
func (pgDialect) lockOnce(ctx context.Context, lc *lockConn, key, _ string, nowait bool) (lockResult, error) {
	q := lc.d.q.lockIntoNowait
	if !nowait {
		q = lc.d.q.lockInto
	}
	return pgLockOnce(ctx, lc, bindPG(q, key), nowait, func(row [][]byte) (bool, uint64, error) {
		if len(row) != 1 {
			return false, 0, fmt.Errorf("sqllock: the locking read returned %d columns", len(row))
		}
		xid, err := strconv.ParseUint(string(row[0]), 10, 64)
		return true, xid, err
	})
}

// pgLockOnce sends BEGIN, the transaction's settings and the locking
// statement lock as one batch, and reads the lock's outcome from the
// statement's row with parse (no row: the lock row is missing).
func pgLockOnce(ctx context.Context, lc *lockConn, lock string, nowait bool, parse func(row [][]byte) (found bool, xid uint64, err error)) (lockResult, error) {
	lr, res, err := pgLockBatch(ctx, lc, "BEGIN", lock, nowait)
	if err != nil {
		return lr, err
	}
	last := res[len(res)-1]
	if len(last.Rows) != 1 {
		return lr, nil // no row
	}
	lr.found, lr.xid, err = parse(last.Rows[0])
	return lr, err
}

// pgLockBatch sends begin (BEGIN, with its options), the transaction's
// settings and stmts (the locking statement and what follows it) as one
// batch on lc, and returns every statement's result.
func pgLockBatch(ctx context.Context, lc *lockConn, begin, stmts string, nowait bool) (lockResult, []*pgconn.Result, error) {
	var lr lockResult
	if lc.id == 0 {
		if err := lc.loadID(ctx); err != nil {
			return lr, nil, err
		}
	}
	lr.id = lc.id
	lc.begun = true
	var b strings.Builder
	b.WriteString(begin)
	b.WriteString("; ")
	b.WriteString(lc.pgTxSettings())
	if !nowait {
		// The wait is bounded by the caller's ctx, not a server default.
		b.WriteString("; SET LOCAL statement_timeout = 0")
		if lc.beginLWT {
			fmt.Fprintf(&b, "; SET LOCAL lock_timeout = '%ds'", lc.d.lwt)
		}
	}
	b.WriteString("; ")
	b.WriteString(stmts)
	res, err := pgExec(ctx, lc.c, b.String())
	lc.setUp() // no session state: a connection that answered is in a known one
	return lr, res, err
}

// pgTxSettings is the lock transaction's settings, sent right after its
// BEGIN: the idle timeout (the TTL), and on PostgreSQL 17 and later
// transaction_timeout off. A DBA's transaction_timeout (for the server,
// database or role) would end the lock's session, and the lock, before its
// TTL while its holder's validity runs, as MariaDB's
// idle_transaction_timeout would (see noIdleTx); changed inside the
// transaction it stops the timer BEGIN started. Both are LOCAL: the
// ROLLBACK that ends the lock restores the session's values.
func (lc *lockConn) pgTxSettings() string {
	s := fmt.Sprintf("SET LOCAL idle_in_transaction_session_timeout = '%ds'", lc.beginTTL)
	if lc.pgHasTxTimeout() {
		s += "; " + pgNoTxTimeout
	}
	return s
}

// pgNoTxTimeout turns PostgreSQL 17's transaction_timeout off for the
// transaction.
const pgNoTxTimeout = "SET LOCAL transaction_timeout = 0"

// pgHasTxTimeout reports whether lc's server has transaction_timeout
// (PostgreSQL 17 and later), from the server_version it reported at the
// connection's start-up (no round trip); learnt once per connection.
func (lc *lockConn) pgHasTxTimeout() bool {
	if lc.txTimeout == 0 {
		lc.txTimeout = 2
		if lc.d.assumeTxTimeout {
			lc.txTimeout = 1
		}
		_ = lc.c.Raw(func(dc any) error {
			if sc, ok := driverConn(dc).(*stdlib.Conn); ok && pgVersionHasTxTimeout(sc.Conn().PgConn().ParameterStatus("server_version")) {
				lc.txTimeout = 1
			}
			return nil
		})
	}
	return lc.txTimeout == 1
}

// pgVersionHasTxTimeout reports whether a server_version ("15.18 (Debian
// 15.18-0+deb12u1)", "17.2", "17beta1", "18devel") is 17 or later.
func pgVersionHasTxTimeout(v string) bool {
	n := 0
	for _, r := range v {
		if r < '0' || r > '9' {
			break
		}
		n = n*10 + int(r-'0')
		if n >= 17 {
			return true
		}
	}
	return false
}
