package sqllock

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
)

// pgAdvisory is PostgreSQL's advisory-lock mode (Options.Advisory,
// mode=advisory): the lock is pg_advisory_xact_lock on the key hashed to
// 64 bits, taken in the same kind of transaction as the row lock (open on
// a pinned connection, ended by ROLLBACK, bounded by
// idle_in_transaction_session_timeout), so liveness, cancellation,
// spares and fencing are the row mode's; there is no lock table and no
// row to create. The fencing token still comes from the counter tables
// (a durable epoch and an unlogged live counter). Two keys whose hashes collide share one lock (see
// docs/sql.md): it costs a needless wait, never a second holder.
type pgAdvisory struct{ pgDialect }

func (pgAdvisory) mode() string { return "advisory" }

func (pgAdvisory) statements(table string) *statements {
	q := pgDialect{}.statements(table)
	q.ddl = []string{q.ddl[1], q.ddl[3], q.ddl[4]} // the fencing epochs, live counters and the mode (no lock table, no semaphore in advisory mode)
	// txid_current(): the transaction's id, which the fencing statement
	// checks is still in progress (an advisory lock alone assigns none).
	q.lockInto = "SELECT pg_advisory_xact_lock(?), txid_current()"
	q.lockIntoNowait = "SELECT pg_try_advisory_xact_lock(?), txid_current()"
	q.probe = "BEGIN; SELECT pg_try_advisory_xact_lock(?); ROLLBACK"
	q.exists, q.ensure = "", ""
	q.table = table
	return q
}

// advisoryKey is key's advisory lock: the first 8 bytes of
// SHA-256(table, 0, key), so each lock table name is a namespace of its own.
func advisoryKey(table, key string) int64 {
	h := sha256.New()
	h.Write([]byte(table))
	h.Write([]byte{0})
	h.Write([]byte(key))
	var sum [sha256.Size]byte
	return int64(binary.BigEndian.Uint64(h.Sum(sum[:0])[:8]))
}

// errAdvisoryBusy: pg_try_advisory_xact_lock returned false, another
// session holds the lock (a conflict, as NOWAIT's error in row mode; see
// pgDialect.conflict). Read-write locks use advisory locks in row mode
// too (rwlock_postgres.go).
var errAdvisoryBusy = errors.New("sqllock: the advisory lock is held by another session")

func (pgAdvisory) lockOnce(ctx context.Context, lc *lockConn, key, _ string, nowait bool) (lockResult, error) {
	q := lc.d.q.lockIntoNowait
	if !nowait {
		q = lc.d.q.lockInto
	}
	lr, err := pgLockOnce(ctx, lc, bindPG(q, advisoryKey(lc.d.q.table, key)), nowait, func(row [][]byte) (bool, uint64, error) {
		if len(row) != 2 {
			return false, 0, fmt.Errorf("sqllock: the advisory lock returned %d columns", len(row))
		}
		if nowait && string(row[0]) != "t" {
			return false, 0, errAdvisoryBusy
		}
		var xid uint64
		_, err := fmt.Sscan(string(row[1]), &xid)
		return true, xid, err
	})
	if err == nil && !lr.found {
		err = errors.New("sqllock: the advisory lock returned no row")
	}
	return lr, err
}

// probe reports whether another session holds key's advisory lock, by
// trying it in a transaction of its own.
func (pgAdvisory) probe(ctx context.Context, d *Driver, key string) (bool, error) {
	res, err := pgExecDB(ctx, d, bindPG(d.q.probe, advisoryKey(d.q.table, key)))
	if err != nil {
		return false, err
	}
	if len(res) != 3 || len(res[1].Rows) != 1 || len(res[1].Rows[0]) != 1 {
		return false, fmt.Errorf("sqllock: the advisory probe returned an unexpected result")
	}
	return string(res[1].Rows[0][0]) != "t", nil
}
