package sqllock

import (
	"context"
	"database/sql"
	"fmt"
	"strings"
)

// MySQL and MariaDB semaphore statements (semaphore.go). The slot table
// is <table>_sem; values are bound as literals (literal.go).
func mysqlSemTable(table string) string { return "`" + table + SemSuffix + "`" }

// semOnce sends the locking read of free slots and the count of slot rows,
// then the live counter's increment and its outcome: one round trip when
// the Driver batches (the statements' result sets read in turn), else one
// each. The increment runs even when fewer slots were free; moving a
// counter on is always safe. The session's settings (lc.begin) go first,
// on their own, when the connection lacks them.
func (mysqlDialect) semOnce(ctx context.Context, lc *lockConn, key, ck, owner string, limit, n int) (semResult, error) {
	var sr semResult
	if lc.id == 0 {
		if err := lc.loadID(ctx); err != nil {
			return sr, err
		}
	}
	sr.lr.id = lc.id
	if !lc.begun {
		lc.sessTTL = 0
		if _, err := lc.c.ExecContext(ctx, lc.begin); err != nil {
			return sr, err
		}
		lc.begun = true
		lc.setUp()
	}
	st := mysqlSemTable(lc.d.q.table)
	lock := bind(fmt.Sprintf("SELECT slot FROM %s WHERE name = ? AND slot < ? ORDER BY slot LIMIT ? FOR UPDATE SKIP LOCKED", st), key, limit, n)
	count := bind(fmt.Sprintf("SELECT COUNT(*), COALESCE(SUM(slot < ?), 0) FROM %s WHERE name = ?", st), limit, key)
	live := bind(lc.d.q.liveNext, owner, ck)
	const outcome = "SELECT ROW_COUNT(), LAST_INSERT_ID()"
	if !lc.batch {
		return semOneByOne(ctx, lc, sr, lock, count, live, n)
	}
	// The attempt's transaction reads committed (semReadCommitted). SET
	// returns no result set, and go-sql-driver starts the rows at the
	// first statement that does: the locking read's (TestSemaphoreNeighbourScan
	// and TestSemaphoreRoundTrips run the batched row).
	rows, err := lc.c.QueryContext(ctx, semReadCommitted+"; "+lock+"; "+count+"; "+live+"; "+outcome)
	if err != nil {
		return sr, err
	}
	defer rows.Close()
	for rows.Next() {
		sr.got++
	}
	var rc int64
	var tok uint64
	for i, dst := range [][]any{{&sr.total, &sr.below}, {&rc, &tok}} {
		if !rows.NextResultSet() || !rows.Next() {
			if err := rows.Err(); err != nil {
				return sr, err
			}
			return sr, fmt.Errorf("sqllock: a batch of semaphore statements lacks result %d", i+2)
		}
		if err := rows.Scan(dst...); err != nil {
			return sr, err
		}
	}
	if err := rows.Close(); err != nil {
		return sr, err
	}
	if sr.got == n {
		sr.lr.found = true
		if rc == 1 {
			sr.lr.token = tok
		}
	}
	return sr, nil
}

// semOneByOne is semOnce's statements one round trip each, the first
// making the attempt's transaction read committed (semReadCommitted).
func semOneByOne(ctx context.Context, lc *lockConn, sr semResult, lock, count, live string, n int) (semResult, error) {
	if _, err := lc.c.ExecContext(ctx, semReadCommitted); err != nil {
		return sr, err
	}
	if err := countRows(ctx, lc.c, lock, &sr.got); err != nil {
		return sr, err
	}
	if err := lc.c.QueryRowContext(ctx, count).Scan(&sr.total, &sr.below); err != nil {
		return sr, err
	}
	if sr.got != n {
		return sr, nil
	}
	res, err := lc.c.ExecContext(ctx, live)
	if err != nil {
		return sr, err
	}
	sr.lr.found = true
	if c, err := res.RowsAffected(); err != nil || c != 1 {
		return sr, err // no live counter, or at the end of its epoch
	}
	tok, err := res.LastInsertId()
	sr.lr.token = uint64(tok)
	return sr, err
}

// countRows runs q on c and counts the rows it returns.
func countRows(ctx context.Context, c *sql.Conn, q string, n *int) error {
	rows, err := c.QueryContext(ctx, q)
	if err != nil {
		return err
	}
	defer rows.Close()
	for rows.Next() {
		*n++
	}
	return rows.Err()
}

// semReadCommitted makes the next transaction read committed: a
// semaphore's locking read of its free slots that finds too few scans on
// to the next row of the slot index, another semaphore's slot, and under
// REPEATABLE READ InnoDB keeps that row locked (a next-key lock) for the
// transaction's life, so a try on that other semaphore skipped it (SKIP
// LOCKED) and was refused with a permit free (TestSemaphoreNeighbourScan).
// Under READ COMMITTED InnoDB takes no gap locks and keeps no lock on a
// row that does not match. It applies to one transaction only, so the
// connection goes back to the pool with the server's isolation.
const semReadCommitted = "SET TRANSACTION ISOLATION LEVEL READ COMMITTED"

// semHeld locks key's free slots with SKIP LOCKED in a transaction of its
// own (read committed, see semReadCommitted), then counts the slot rows (a
// consistent read after the locking one), and rolls back: held = rows -
// free.
func (mysqlDialect) semHeld(ctx context.Context, d *Driver, key string) (int, error) {
	st := mysqlSemTable(d.q.table)
	tx, err := d.db.BeginTx(ctx, &sql.TxOptions{Isolation: sql.LevelReadCommitted})
	if err != nil {
		return 0, err
	}
	defer func() { _ = tx.Rollback() }()
	rows, err := tx.QueryContext(ctx, bind(fmt.Sprintf("SELECT slot FROM %s WHERE name = ? FOR UPDATE SKIP LOCKED", st), key))
	if err != nil {
		return 0, err
	}
	free := 0
	for rows.Next() {
		free++
	}
	if err := rows.Err(); err != nil {
		return 0, err
	}
	var total int
	if err := tx.QueryRowContext(ctx, bind(fmt.Sprintf("SELECT COUNT(*) FROM %s WHERE name = ?", st), key)).Scan(&total); err != nil {
		return 0, err
	}
	return total - free, tx.Rollback()
}

// semCreate: INSERT IGNORE of the slots from to to-1.
func (mysqlDialect) semCreate(table, key string, from, to int) string {
	var b strings.Builder
	fmt.Fprintf(&b, "INSERT IGNORE INTO %s (name, slot) VALUES ", mysqlSemTable(table))
	k := bind("?", key)
	for s := from; s < to; s++ {
		if s > from {
			b.WriteString(", ")
		}
		fmt.Fprintf(&b, "(%s, %d)", k, s)
	}
	return b.String()
}
