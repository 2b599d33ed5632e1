package sqllock

import (
	"context"
	"fmt"
	"strconv"
)

// PostgreSQL semaphore statements (semaphore.go).
func pgSemTable(table string) string { return `"` + table + SemSuffix + `"` }

// semOnce opens the transaction with its idle timeout, locks the free
// slots and counts the slot rows, in one round trip. txid_current() is
// the transaction's id, which the fencing statement checks is still in
// progress.
func (pgDialect) semOnce(ctx context.Context, lc *lockConn, key, _, _ string, limit, n int) (semResult, error) {
	var sr semResult
	if lc.id == 0 {
		if err := lc.loadID(ctx); err != nil {
			return sr, err
		}
	}
	sr.lr.id = lc.id
	lc.begun = true
	st := pgSemTable(lc.d.q.table)
	q := "BEGIN; " + lc.pgTxSettings() + "; " +
		bindPG(fmt.Sprintf("SELECT txid_current() FROM %s WHERE name = ? AND slot < ? ORDER BY slot LIMIT ? FOR UPDATE SKIP LOCKED; ", st), key, limit, n) +
		bindPG(fmt.Sprintf("SELECT count(*), count(*) FILTER (WHERE slot < ?) FROM %s WHERE name = ?", st), limit, key)
	res, err := pgExec(ctx, lc.c, q)
	lc.setUp()
	if err != nil {
		return sr, err
	}
	// BEGIN, the settings (one or two), the slots, the count.
	if len(res) < 4 || len(res[len(res)-1].Rows) != 1 || len(res[len(res)-1].Rows[0]) != 2 {
		return sr, fmt.Errorf("sqllock: the semaphore statements returned an unexpected result")
	}
	slots, count := res[len(res)-2], res[len(res)-1]
	sr.got = len(slots.Rows)
	if sr.total, err = strconv.Atoi(string(count.Rows[0][0])); err != nil {
		return sr, err
	}
	if sr.below, err = strconv.Atoi(string(count.Rows[0][1])); err != nil {
		return sr, err
	}
	if sr.got == n {
		sr.lr.found = true
		sr.lr.xid, err = strconv.ParseUint(string(slots.Rows[0][0]), 10, 64)
	}
	return sr, err
}

// semHeld: in one round trip on another connection, a transaction locks
// key's free slots with SKIP LOCKED, counts the slot rows after it, and
// is rolled back: held = rows - free.
func (pgDialect) semHeld(ctx context.Context, d *Driver, key string) (int, error) {
	st := pgSemTable(d.q.table)
	res, err := pgExecDB(ctx, d, "BEGIN; "+
		bindPG(fmt.Sprintf("SELECT slot FROM %s WHERE name = ? FOR UPDATE SKIP LOCKED; SELECT count(*) FROM %s WHERE name = ?", st, st), key, key)+
		"; ROLLBACK")
	if err != nil {
		return 0, err
	}
	if len(res) != 4 || len(res[2].Rows) != 1 {
		return 0, fmt.Errorf("sqllock: the semaphore probe returned an unexpected result")
	}
	total, err := strconv.Atoi(string(res[2].Rows[0][0]))
	return total - len(res[1].Rows), err
}

// semCreate: INSERT of the slots from to to-1, ignoring any that exist.
func (pgDialect) semCreate(table, key string, from, to int) string {
	return bindPG(fmt.Sprintf("INSERT INTO %s (name, slot) SELECT ?, generate_series(?, ?) ON CONFLICT DO NOTHING", pgSemTable(table)), key, from, to-1)
}
