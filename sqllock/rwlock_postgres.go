package sqllock

import (
	"context"
	"fmt"
	"strconv"

	"github.com/distlock/distlock/backend"
)

// PostgreSQL read-write lock statements (rwlock.go), in row and advisory
// modes alike: the lock is the transaction-level advisory lock of the
// lock's name hashed as advisory mode hashes keys (advisoryKey), shared
// for readers, exclusive for writers. PostgreSQL's lock manager queues a
// request that conflicts with a waiting one behind it (and a try fails),
// so a waiting writer keeps new readers out; a row's FOR SHARE would not
// (a shared row lock is granted past a waiting FOR UPDATE).

// rwLock sends BEGIN, the transaction's settings and the advisory lock
// (its try for nowait), for a writer with txid_current(), which gives the
// transaction the id the write token's statement checks, for a reader
// followed by the read of the last write's token: one round trip. A
// reader's transaction gets no id (it writes nothing) and is READ
// COMMITTED whatever the session's default, so the token read takes its
// snapshot when it runs, after the lock was granted, and sees the token
// the last writer committed before its grant returned.
func (pgDialect) rwLock(ctx context.Context, lc *lockConn, name string, mode backend.Kind, nowait bool) (lockResult, error) {
	fn := "pg_advisory_xact_lock"
	if nowait {
		fn = "pg_try_advisory_xact_lock"
	}
	begin, cols, q := "BEGIN", 2, "SELECT %s(?), txid_current()"
	if mode == backend.Read {
		fn += "_shared"
		begin, cols, q = "BEGIN ISOLATION LEVEL READ COMMITTED", 1, "SELECT %s(?); "+
			`SELECT token FROM "`+lc.d.q.table+FenceSuffix+`" WHERE name = ?`
	}
	args := []any{advisoryKey(lc.d.q.table, name)}
	if mode == backend.Read {
		args = append(args, name)
	}
	lr, res, err := pgLockBatch(ctx, lc, begin, bindPG(fmt.Sprintf(q, fn), args...), nowait)
	if err != nil {
		return lr, err
	}
	at := len(res) - 1 // the lock's result
	if mode == backend.Read {
		at--
	}
	if at < 0 || len(res[at].Rows) != 1 || len(res[at].Rows[0]) != cols {
		return lr, fmt.Errorf("sqllock: the advisory lock returned an unexpected result")
	}
	row := res[at].Rows[0]
	if nowait && string(row[0]) != "t" {
		return lr, errAdvisoryBusy
	}
	lr.found = true
	if mode == backend.Write {
		lr.xid, err = strconv.ParseUint(string(row[1]), 10, 64)
	} else if len(res[at+1].Rows) == 1 {
		lr.token, err = strconv.ParseUint(string(res[at+1].Rows[0][0]), 10, 64)
	}
	return lr, err
}

// rwWriteToken bumps name's durable counter in the fence table by one and
// checks, in the same statement after the counter's row is locked, that
// the lock's transaction is still in progress (as token does for the
// mutex); the commit is durable (a WAL flush) before the token is
// returned, whatever the session's synchronous_commit (s sets it on for
// the statement's transaction, as the mutex's new epoch does).
func (pgDialect) rwWriteToken(ctx context.Context, lc *lockConn, name, owner string, lr lockResult) (uint64, error) {
	q := fmt.Sprintf(`WITH s AS (SELECT set_config('synchronous_commit', 'on', true)) `+
		`INSERT INTO "%s" AS f (name, token, owner, holder_id, granted_at) `+
		"SELECT $1::bytea, 1, $2::bytea, $3::bigint, now() FROM s "+
		"ON CONFLICT (name) DO UPDATE SET token = f.token + 1, owner = EXCLUDED.owner, holder_id = EXCLUDED.holder_id, granted_at = EXCLUDED.granted_at "+
		"RETURNING f.token, txid_status($4::bigint)", lc.d.q.table+FenceSuffix)
	return pgToken(ctx, lc, q, name, owner, lr)
}
