package sqllock

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	"github.com/distlock/distlock/backend"
)

// MySQL and MariaDB read-write lock statements (rwlock.go): the lock
// table's row of the lock's name, locked in share mode by readers and for
// update by writers. The shared side's syntax is MariaDB's (LOCK IN SHARE
// MODE NOWAIT, 10.3+); MySQL 8 spells it FOR SHARE NOWAIT and refuses
// NOWAIT after LOCK IN SHARE MODE, so a try of the read side fails there
// with a syntax error (docs/sql.md).

// rwLock sends the session settings first when the connection lacks them
// (a statement of their own), then the locking read and, for a reader, the
// read of the last write's token: one round trip when the Driver batches
// (the result sets read in turn), else one each. The token is a plain
// read: InnoDB takes the transaction's snapshot at its first plain read,
// which comes after the lock is granted, and the writer before committed
// its token before its grant returned.
func (mysqlDialect) rwLock(ctx context.Context, lc *lockConn, name string, mode backend.Kind, nowait bool) (lockResult, error) {
	var lr lockResult
	if lc.id == 0 {
		if err := lc.loadID(ctx); err != nil {
			return lr, err
		}
	}
	lr.id = lc.id
	if !lc.begun {
		lc.sessTTL = 0
		if _, err := lc.c.ExecContext(ctx, lc.begin); err != nil {
			return lr, err
		}
		lc.begun = true
		lc.setUp()
	}
	side := " LOCK IN SHARE MODE"
	if mode == backend.Write {
		side = " FOR UPDATE"
	}
	if nowait {
		side += " NOWAIT"
	}
	lock := bind("SELECT 1 FROM `"+lc.d.q.table+"` WHERE name = ?"+side, name)
	var n int
	if mode == backend.Write {
		err := countRows(ctx, lc.c, lock, &n)
		lr.found = err == nil && n == 1
		return lr, err
	}
	read := bind("SELECT token FROM `"+lc.d.q.table+FenceSuffix+"` WHERE name = ?", name)
	if !lc.batch {
		if err := countRows(ctx, lc.c, lock, &n); err != nil || n != 1 {
			return lr, err
		}
		lr.found = true
		err := lc.c.QueryRowContext(ctx, read).Scan(&lr.token)
		if errors.Is(err, sql.ErrNoRows) {
			err = nil // never written
		}
		return lr, err
	}
	rows, err := lc.c.QueryContext(ctx, lock+"; "+read)
	if err != nil {
		return lr, err
	}
	defer rows.Close()
	for rows.Next() {
		n++
	}
	if !rows.NextResultSet() {
		if err := rows.Err(); err != nil {
			return lr, err
		}
		return lr, fmt.Errorf("sqllock: a batch of read-lock statements lacks its second result")
	}
	if rows.Next() {
		if err := rows.Scan(&lr.token); err != nil {
			return lr, err
		}
	}
	if err := rows.Close(); err != nil {
		return lr, err
	}
	lr.found = n == 1
	return lr, nil
}

// rwWriteToken bumps name's durable counter (fence: an autocommit
// statement on another connection), then pings the pinned session: its
// answer, after the commit, shows that the session, and so the lock, was
// alive throughout, so the tokens follow the order of the holds. A
// session gone meanwhile burns the token (never handed out; readers may
// report it, see docs/sql.md).
func (mysqlDialect) rwWriteToken(ctx context.Context, lc *lockConn, name, owner string, _ lockResult) (uint64, error) {
	tok, err := lc.d.fence(ctx, name, owner, lc.id)
	if err != nil {
		return 0, err
	}
	if err := lc.c.PingContext(ctx); err != nil {
		return 0, err
	}
	return tok, nil
}
