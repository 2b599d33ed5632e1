package sqlbench

// EXPERIMENT (docs/notes-sqlproc.md): the locking read and the live
// counter's increment in one stored procedure, one CALL round trip, over a
// default *sql.DB, against the same client sending the two statements
// (what sqllock does over such a pool) and against distlock and the bare
// FOR UPDATE.

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"

	"github.com/distlock/distlock/bench/internal/measure"
	"github.com/distlock/distlock/sqllock"
)

// procDDL returns the procedure that takes the row lock of key k in tbl
// and then moves k's live counter on, as sqllock's liveNext does, and
// returns one row (found, token): token 0 when the key has no live counter
// or it stands at the end of its epoch (the caller then starts a new
// epoch). Each statement of a procedure opens and locks its own tables
// when it runs: the MEMORY table is not locked while the SELECT waits.
func procDDL(tbl string) string {
	return fmt.Sprintf("CREATE OR REPLACE PROCEDURE `%[1]s_next`(IN k VARBINARY(1024), IN o VARBINARY(128))\n"+
		"MODIFIES SQL DATA SQL SECURITY INVOKER\n"+
		"BEGIN\n"+
		"  DECLARE f INT DEFAULT 0;\n"+
		"  DECLARE n INT DEFAULT 0;\n"+
		"  DECLARE CONTINUE HANDLER FOR NOT FOUND SET f = 0;\n"+
		"  SELECT 1 INTO f FROM `%[1]s` WHERE name = k FOR UPDATE;\n"+
		"  IF f = 1 THEN\n"+
		"    UPDATE `%[1]s_live` SET token = LAST_INSERT_ID(token + 1), owner = o, holder_id = CONNECTION_ID(), granted_at = NOW(6)\n"+
		"      WHERE name = k AND token & 16777215 < 16777215;\n"+
		"    SET n = ROW_COUNT();\n"+
		"  END IF;\n"+
		"  SELECT f, IF(n = 1, LAST_INSERT_ID(), 0);\n"+
		"END", tbl)
}

// funcDDL is the same as a stored function (the negative control of
// TestProcWaitScope): a function is prelocked with every table it uses
// for the whole calling statement.
func funcDDL(tbl string) string {
	return fmt.Sprintf("CREATE OR REPLACE FUNCTION `%[1]s_fnext`(k VARBINARY(1024), o VARBINARY(128)) RETURNS BIGINT UNSIGNED\n"+
		"MODIFIES SQL DATA SQL SECURITY INVOKER\n"+
		"BEGIN\n"+
		"  DECLARE f INT DEFAULT 0;\n"+
		"  DECLARE CONTINUE HANDLER FOR NOT FOUND SET f = 0;\n"+
		"  SELECT 1 INTO f FROM `%[1]s` WHERE name = k FOR UPDATE;\n"+
		"  IF f = 1 THEN\n"+
		"    UPDATE `%[1]s_live` SET token = LAST_INSERT_ID(token + 1), owner = o, holder_id = CONNECTION_ID(), granted_at = NOW(6)\n"+
		"      WHERE name = k AND token & 16777215 < 16777215;\n"+
		"    IF ROW_COUNT() = 1 THEN RETURN LAST_INSERT_ID(); END IF;\n"+
		"  END IF;\n"+
		"  RETURN 0;\n"+
		"END", tbl)
}

// setUpProc creates tbl's tables (sqllock.DDL) and its procedure, once per
// table.
func setUpProc(ctx context.Context, db *sql.DB, tbl string) error {
	procOnce.Lock()
	defer procOnce.Unlock()
	if procMade[tbl] {
		return nil
	}
	ddl, err := sqllock.DDL(tbl)
	if err != nil {
		return err
	}
	for _, q := range append(ddl, procDDL(tbl)) {
		if _, err := db.ExecContext(ctx, q); err != nil {
			return fmt.Errorf("%s: %w", q, err)
		}
	}
	procMade[tbl] = true
	return nil
}

var (
	procOnce sync.Mutex
	procMade = map[string]bool{}
)

// pinnedClient is one worker's client over a default *sql.DB, with one
// connection pinned for all its acquisitions, in sqllock's session state
// (autocommit off, wait_timeout 30): per acquire+release it sends CALL
// <table>_next (proc) or the locking read and the increment as two
// statements (sqllock's protocol over such a pool), then COMMIT.
type pinnedClient struct {
	db   *sql.DB
	tbl  string
	proc bool
	conn *sql.Conn
	id   uint64
	rows map[string]bool
	n    int
	last *sync.Map // key -> *atomic.Uint64: the last token granted, shared by one library's workers
}

var procLast, stmtsLast sync.Map

func newProc(ctx context.Context, addr string) (measure.Contender, error) {
	return newPinned(ctx, addr, true)
}

func newStmts(ctx context.Context, addr string) (measure.Contender, error) {
	return newPinned(ctx, addr, false)
}

func newPinned(ctx context.Context, addr string, proc bool) (measure.Contender, error) {
	db := openDefault(addr)
	if err := setUpProc(ctx, db, table); err != nil {
		_ = db.Close()
		return nil, err
	}
	last := &stmtsLast
	if proc {
		last = &procLast
	}
	return &pinnedClient{db: db, tbl: table, proc: proc, rows: map[string]bool{}, last: last}, nil
}

func (c *pinnedClient) pin(ctx context.Context) error {
	if c.conn != nil {
		return nil
	}
	conn, err := c.db.Conn(ctx)
	if err != nil {
		return err
	}
	if _, err := conn.ExecContext(ctx, "SET SESSION autocommit = 0, wait_timeout = 30"); err != nil {
		_ = conn.Close()
		return err
	}
	if err := conn.QueryRowContext(ctx, "SELECT CONNECTION_ID()").Scan(&c.id); err != nil {
		_ = conn.Close()
		return err
	}
	c.conn = conn
	return nil
}

// drop closes the pinned connection (never pooled again).
func (c *pinnedClient) drop() {
	if c.conn != nil {
		_ = c.conn.Raw(func(any) error { return driver.ErrBadConn })
		_ = c.conn.Close()
		c.conn = nil
	}
}

func (c *pinnedClient) Acquire(ctx context.Context, key string) (func(context.Context) error, error) {
	if !c.rows[key] { // once per key, as FOR UPDATE's client does
		if _, err := c.db.ExecContext(ctx, fmt.Sprintf("INSERT IGNORE INTO `%s` (name) VALUES (X'%x')", c.tbl, key)); err != nil {
			return nil, err
		}
		c.rows[key] = true
	}
	if err := c.pin(ctx); err != nil {
		return nil, err
	}
	c.n++
	owner := fmt.Sprintf("bench-owner-%p-%d", c, c.n)
	tok, err := c.lockNext(ctx, key, owner)
	if err == nil && tok == 0 {
		tok, err = c.newEpoch(ctx, key, owner)
	}
	if err != nil {
		c.drop()
		return nil, err
	}
	v, _ := c.last.LoadOrStore(key, new(atomic.Uint64))
	if prev := v.(*atomic.Uint64).Swap(tok); tok <= prev {
		_, _ = c.conn.ExecContext(ctx, "COMMIT")
		return nil, fmt.Errorf("token %d after %d", tok, prev)
	}
	return func(ctx context.Context) error {
		if _, err := c.conn.ExecContext(ctx, "COMMIT"); err != nil {
			c.drop()
			return err
		}
		return nil
	}, nil
}

// lockNext takes the row lock and moves the live counter on: one CALL, or
// two statements; 0 means no live counter (or the end of its epoch).
func (c *pinnedClient) lockNext(ctx context.Context, key, owner string) (uint64, error) {
	if c.proc {
		var found int
		var tok uint64
		if err := c.conn.QueryRowContext(ctx, fmt.Sprintf("CALL `%s_next`(X'%x', X'%x')", c.tbl, key, owner)).Scan(&found, &tok); err != nil {
			return 0, err
		}
		if found != 1 {
			return 0, errors.New("no lock row")
		}
		return tok, nil
	}
	res, err := c.conn.ExecContext(ctx, fmt.Sprintf("SELECT 1 INTO @distlock_found FROM `%s` WHERE name = X'%x' FOR UPDATE", c.tbl, key))
	if err != nil {
		return 0, err
	}
	if n, err := res.RowsAffected(); err != nil || n != 1 {
		return 0, fmt.Errorf("no lock row (%v)", err)
	}
	res, err = c.conn.ExecContext(ctx, fmt.Sprintf("UPDATE `%s_live` SET token = LAST_INSERT_ID(token + 1), owner = X'%x', holder_id = CONNECTION_ID(), granted_at = NOW(6) "+
		"WHERE name = X'%x' AND token & 16777215 < 16777215", c.tbl, owner, key))
	if err != nil {
		return 0, err
	}
	if n, err := res.RowsAffected(); err != nil || n != 1 {
		return 0, err
	}
	tok, err := res.LastInsertId()
	return uint64(tok), err
}

// newEpoch is sqllock's (fence.go), without the eviction: the durable
// epoch bumped in autocommit on another connection, then the live counter
// set to its first token on the pinned one.
func (c *pinnedClient) newEpoch(ctx context.Context, key, owner string) (uint64, error) {
	res, err := c.db.ExecContext(ctx, fmt.Sprintf("INSERT INTO `%s_fence` (name, token, owner, holder_id, granted_at) "+
		"VALUES (X'%x', LAST_INSERT_ID(1), X'%x', %d, NOW(6)) "+
		"ON DUPLICATE KEY UPDATE token = LAST_INSERT_ID(token + 1), owner = X'%x', holder_id = %d, granted_at = NOW(6)",
		c.tbl, key, owner, c.id, owner, c.id))
	if err != nil {
		return 0, err
	}
	e, err := res.LastInsertId()
	if err != nil {
		return 0, err
	}
	first := uint64(e)<<24 | 1
	res, err = c.conn.ExecContext(ctx, fmt.Sprintf("INSERT INTO `%s_live` (name, token, owner, holder_id, granted_at) "+
		"VALUES (X'%x', LAST_INSERT_ID(%d), X'%x', CONNECTION_ID(), NOW(6)) "+
		"ON DUPLICATE KEY UPDATE token = LAST_INSERT_ID(GREATEST(token + 1, %d)), owner = X'%x', holder_id = CONNECTION_ID(), granted_at = NOW(6)",
		c.tbl, key, first, owner, first, owner))
	if err != nil {
		return 0, err
	}
	tok, err := res.LastInsertId()
	return uint64(tok), err
}

func (c *pinnedClient) Close() {
	if c.conn != nil {
		_, _ = c.conn.ExecContext(context.Background(), "ROLLBACK")
		c.drop()
	}
	_ = c.db.Close()
}
