package sqllock

import (
	"context"
	"fmt"
)

// Whether a Driver's blocking waits CALL the procedure (MySQL, MariaDB):
// the procedure takes the row lock and moves the live counter on in one
// round trip, where the two statements take two, one of them while the
// lock is held and others wait for it.
const (
	procUnknown int32 = iota // not created by this Driver: the first CALL tells
	procYes
	procNo
)

// setUpProc decides whether d calls the procedure and, if New creates the
// tables, creates it. A pool that batches statements (multiStatements)
// already sends both in one round trip and gets none. A server's refusal
// (privileges, read-only, a MySQL without CREATE PROCEDURE IF NOT EXISTS)
// only means two statements; not reaching the server fails New, as the
// tables' creation does.
//
// CREATE PROCEDURE IF NOT EXISTS does not wait for sessions calling the
// procedure, or blocked inside it on a row lock: a New beside busy
// Drivers is not held up by them.
func (d *Driver) setUpProc(ctx context.Context, o Options) error {
	if _, ok := d.dia.(mysqlDialect); !ok || o.NoProcedure {
		d.proc.Store(procNo)
		return nil
	}
	if o.NoCreateTable {
		return nil // a DBA may have created it (DDL): the first CALL tells
	}
	c, err := d.db.Conn(ctx)
	if err != nil {
		return fmt.Errorf("sqllock: create procedure: %w", d.classify(err))
	}
	defer c.Close()
	batch, err := d.dia.batching(ctx, d, c)
	if err != nil {
		return fmt.Errorf("sqllock: create procedure: %w", d.classify(err))
	}
	if batch {
		d.proc.Store(procNo)
		return nil
	}
	_, err = c.ExecContext(ctx, d.q.procDDL)
	switch {
	case err == nil:
		d.proc.Store(procYes)
	case serverCode(err) != 0:
		d.proc.Store(procNo)
	default:
		return fmt.Errorf("sqllock: create procedure: %w", d.classify(err))
	}
	return nil
}

// procMissing reports whether err says the procedure cannot be called:
// it does not exist (1305, ER_SP_DOES_NOT_EXIST: never created, or
// dropped), or the account may not execute it (1370,
// ER_PROCACCESS_DENIED_ERROR; 1044 and 1142 for the schema and tables).
func procMissing(err error) bool {
	switch serverCode(err) {
	case 1305, 1370, 1044, 1142:
		return true
	}
	return false
}

// callNext is the locking read of a blocking wait and the live counter's
// increment in one CALL. ok is false when the procedure cannot be called:
// the Driver then stops trying and the caller sends the two statements.
func callNext(ctx context.Context, lc *lockConn, key, owner string) (lr lockResult, ok bool, err error) {
	lr.id = lc.id
	var found int
	err = lc.c.QueryRowContext(ctx, bind(lc.d.q.lockNext, key, owner)).Scan(&found, &lr.token)
	if procMissing(err) {
		lc.d.proc.Store(procNo)
		return lockResult{id: lc.id}, false, nil
	}
	if err != nil {
		return lockResult{id: lc.id}, true, err
	}
	if lc.d.proc.Load() == procUnknown {
		lc.d.proc.Store(procYes)
	}
	lr.found = found == 1
	if !lr.found {
		lr.token = 0
	}
	return lr, true, nil
}
