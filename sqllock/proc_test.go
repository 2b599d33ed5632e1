package sqllock_test

import (
	"context"
	"database/sql"
	"fmt"
	"testing"
	"time"

	"github.com/distlock/distlock/backend"
	"github.com/distlock/distlock/sqllock"
	"github.com/go-sql-driver/mysql"
)

// TestProcedurePrivileges: the procedure is an optimisation the account
// may not be allowed. Without CREATE ROUTINE, New still succeeds and
// waits send the two statements; without EXECUTE on a procedure a DBA
// made, the first CALL is refused and the same wait goes on with the two
// statements; with EXECUTE, NoCreateTable Drivers call it; a procedure
// dropped under a running Driver is no fault either. Tokens keep rising
// across Drivers of every mode on one key.
func TestProcedurePrivileges(t *testing.T) {
	s := startServer(t)
	ctx := ctxFor(t, 2*time.Minute)
	table := "proc_" + uniqueKey("t")[len("sqllock-test-t-"):]
	proc := "`" + dbName + "`.`" + table + sqllock.ProcSuffix + "`"
	const user, pass = "dl_noroutine", "dl-noroutine-pw"
	admin := func(q string) {
		t.Helper()
		if _, err := s.admin.ExecContext(ctx, q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	admin("DROP USER IF EXISTS '" + user + "'@'%'")
	admin("CREATE USER '" + user + "'@'%' IDENTIFIED BY '" + pass + "'")
	t.Cleanup(func() { _, _ = s.admin.Exec("DROP USER IF EXISTS '" + user + "'@'%'") })
	admin("GRANT SELECT, INSERT, UPDATE, DELETE, CREATE ON `" + dbName + "`.* TO '" + user + "'@'%'")
	t.Cleanup(func() { _, _ = s.admin.Exec("DROP PROCEDURE IF EXISTS " + proc) })

	exists := func() bool {
		t.Helper()
		var n int
		err := s.admin.QueryRowContext(ctx, "SELECT COUNT(*) FROM information_schema.ROUTINES WHERE ROUTINE_SCHEMA = ? AND ROUTINE_NAME = ?",
			dbName, table+sqllock.ProcSuffix).Scan(&n)
		if err != nil {
			t.Fatal(err)
		}
		return n == 1
	}

	key := uniqueKey("proc")
	var last uint64
	// driver makes a Driver over its own pool as user (root when empty),
	// whose requests c counts.
	driver := func(t *testing.T, name string, opts sqllock.Options) (*sqllock.Driver, *countingDialer) {
		t.Helper()
		c := &countingDialer{}
		cfg, err := mysql.ParseDSN(mysqlDSN(s.addr()))
		if err != nil {
			t.Fatal(err)
		}
		if name != "" {
			cfg.User, cfg.Passwd = name, pass
		}
		cfg.InterpolateParams = true
		cfg.DialFunc = dialer(s.addr, c.wrap)
		conn, err := mysql.NewConnector(cfg)
		if err != nil {
			t.Fatal(err)
		}
		db := sql.OpenDB(conn)
		t.Cleanup(func() { _ = db.Close() })
		opts.Table = table
		d, err := sqllock.New(ctx, db, &opts)
		if err != nil {
			t.Fatalf("New as %q: %v", name, err)
		}
		t.Cleanup(func() { _ = d.Close() })
		return d, c
	}
	// waits runs n blocking acquire+release cycles on key and returns the
	// requests the last one sent; each token must exceed every earlier one.
	waits := func(t *testing.T, d *sqllock.Driver, c *countingDialer, n int) int {
		t.Helper()
		var sent int
		for range n {
			before := c.writes()
			g, err := d.Wait(ctx, backend.Request{Key: key, Owner: "owner-proc", TTL: 5 * time.Second})
			if err != nil {
				t.Fatalf("Wait: %v", err)
			}
			if g.Token <= last {
				t.Fatalf("token %d after %d", g.Token, last)
			}
			last = g.Token
			if err := g.Lock.Release(ctx); err != nil {
				t.Fatalf("Release: %v", err)
			}
			sent = c.writes() - before
		}
		return sent
	}

	// The tables, made by root without the procedure.
	driver(t, "", sqllock.Options{NoProcedure: true})
	if exists() {
		t.Fatal("NoProcedure created the procedure")
	}

	t.Run("no CREATE ROUTINE", func(t *testing.T) {
		d, c := driver(t, user, sqllock.Options{})
		if exists() {
			t.Fatal("an account without CREATE ROUTINE created the procedure")
		}
		if got := waits(t, d, c, 3); got != 3 {
			t.Errorf("a wait and its release sent %d requests, want 3 (two statements and COMMIT)", got)
		}
	})

	root, rc := driver(t, "", sqllock.Options{})
	if !exists() {
		t.Fatal("New as root did not create the procedure")
	}
	if got := waits(t, root, rc, 3); got != 2 {
		t.Errorf("root: a wait and its release sent %d requests, want 2 (CALL and COMMIT)", got)
	}

	t.Run("no EXECUTE", func(t *testing.T) {
		d, c := driver(t, user, sqllock.Options{NoCreateTable: true})
		// The first wait's CALL is refused (1370) and it goes on with the
		// two statements; later waits send only those.
		if got := waits(t, d, c, 3); got != 3 {
			t.Errorf("a wait and its release sent %d requests, want 3", got)
		}
	})

	admin("GRANT EXECUTE ON PROCEDURE " + proc + " TO '" + user + "'@'%'")
	t.Run("EXECUTE, NoCreateTable", func(t *testing.T) {
		d, c := driver(t, user, sqllock.Options{NoCreateTable: true})
		if got := waits(t, d, c, 3); got != 2 {
			t.Errorf("a wait and its release sent %d requests, want 2", got)
		}
		// Modes alternate on one key: tokens keep rising (checked by waits).
		plain, pc := driver(t, user, sqllock.Options{NoProcedure: true})
		for range 3 {
			waits(t, d, c, 1)
			waits(t, plain, pc, 1)
			waits(t, root, rc, 1)
		}
	})

	t.Run("dropped", func(t *testing.T) {
		admin("DROP PROCEDURE " + proc)
		// The first wait's CALL fails (1305) and it goes on; then none is sent.
		if got := waits(t, root, rc, 3); got != 3 {
			t.Errorf("after DROP PROCEDURE a wait and its release sent %d requests, want 3", got)
		}
	})
}

// TestProcedureCreateBesideWaiters: New's CREATE PROCEDURE IF NOT EXISTS
// does not wait for sessions inside the procedure (one holding the row
// lock it took in a CALL, one blocked in a CALL behind it), nor do they
// wait for it.
func TestProcedureCreateBesideWaiters(t *testing.T) {
	s := startServer(t)
	ctx := ctxFor(t, time.Minute)
	d, _ := newDriver(t, s, sqllock.Options{})
	key := uniqueKey("create")
	r := backend.Request{Key: key, Owner: "holder", TTL: 30 * time.Second}
	g, err := d.Wait(ctx, r)
	if err != nil {
		t.Fatal(err)
	}
	waitCtx, cancelWait := context.WithCancel(ctx)
	defer cancelWait()
	got := make(chan error, 1)
	w, _ := newDriver(t, s, sqllock.Options{})
	go func() {
		wg, err := w.Wait(waitCtx, backend.Request{Key: key, Owner: "waiter", TTL: 30 * time.Second})
		if err == nil {
			err = wg.Lock.Release(ctx)
		}
		got <- err
	}()
	// The waiter is inside the CALL, blocked on the row lock.
	waitFor(t, func() bool {
		var n int
		_ = s.admin.QueryRowContext(ctx, "SELECT COUNT(*) FROM information_schema.PROCESSLIST WHERE INFO LIKE 'SELECT 1 INTO f FROM%'").Scan(&n)
		return n == 1
	})
	// A new Driver's New runs CREATE PROCEDURE IF NOT EXISTS meanwhile.
	// It must finish while both sessions are still there.
	newCtx, cancelNew := context.WithTimeout(ctx, 20*time.Second)
	defer cancelNew()
	db := s.newDB(s.addr, false)
	defer db.Close()
	d2, err := sqllock.New(newCtx, db, &sqllock.Options{Table: testTable})
	if err != nil {
		t.Fatalf("New beside a holder and a waiter in the procedure: %v", err)
	}
	_ = d2.Close()
	select {
	case err := <-got:
		t.Fatalf("the waiter ended before the holder released: %v", err)
	default:
	}
	if err := g.Lock.Release(ctx); err != nil {
		t.Fatal(err)
	}
	if err := <-got; err != nil {
		t.Fatalf("waiter: %v", err)
	}
}

// waitFor polls cond every 50 ms for at most 20 s.
func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	for range 400 {
		if cond() {
			return
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Fatal(fmt.Errorf("condition not met in 20 s"))
}

// TestProcedureLongestTable: the procedure's name fits MySQL's 64
// characters for the longest table name allowed (58), so such a Driver
// gets the procedure too (a refusal would only fall back silently).
func TestProcedureLongestTable(t *testing.T) {
	s := startServer(t)
	table := "l" + uniqueKey("x")[len("sqllock-test-x-"):]
	for len(table) < 58 {
		table += "_"
	}
	t.Cleanup(func() {
		for _, q := range []string{"DROP PROCEDURE IF EXISTS `" + table + sqllock.ProcSuffix + "`",
			"DROP TABLE IF EXISTS `" + table + "`, `" + table + sqllock.FenceSuffix + "`, `" + table + sqllock.LiveSuffix + "`, `" + table + sqllock.SemSuffix + "`"} {
			_, _ = s.admin.Exec(q)
		}
	})
	d, _ := newDriver(t, s, sqllock.Options{Table: table})
	var n int
	err := s.admin.QueryRowContext(ctxFor(t, 10*time.Second), "SELECT COUNT(*) FROM information_schema.ROUTINES WHERE ROUTINE_SCHEMA = ? AND ROUTINE_NAME = ?",
		dbName, table+sqllock.ProcSuffix).Scan(&n)
	if err != nil || n != 1 {
		t.Fatalf("procedure of a %d-character table: %d found, %v", len(table), n, err)
	}
	g, err := d.Wait(ctxFor(t, 10*time.Second), backend.Request{Key: uniqueKey("long"), Owner: "o", TTL: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	if err := g.Lock.Release(ctxFor(t, 10*time.Second)); err != nil {
		t.Fatal(err)
	}
}
