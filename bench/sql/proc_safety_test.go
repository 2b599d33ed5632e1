package sqlbench

// EXPERIMENT (docs/notes-sqlproc.md): what the procedure of proc_test.go
// must guarantee to be usable by sqllock.

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"
)

// chkTable is the safety checks' own lock table (and procedure, function).
const chkTable = "procchk"

// session is one pinned connection in sqllock's lock-session state.
type session struct {
	c  *sql.Conn
	id uint64
}

func openSession(t *testing.T, db *sql.DB, lwt int) *session {
	t.Helper()
	ctx := context.Background()
	c, err := db.Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { // never back to the pool in this session state
		_ = c.Raw(func(any) error { return driver.ErrBadConn })
		_ = c.Close()
	})
	if _, err := c.ExecContext(ctx, fmt.Sprintf("SET SESSION autocommit = 0, wait_timeout = 30, innodb_lock_wait_timeout = %d", lwt)); err != nil {
		t.Fatal(err)
	}
	s := &session{c: c}
	if err := c.QueryRowContext(ctx, "SELECT CONNECTION_ID()").Scan(&s.id); err != nil {
		t.Fatal(err)
	}
	return s
}

// call runs the procedure (or, if fn, the function) for key on s and
// returns the token.
func (s *session) call(ctx context.Context, fn bool, key string) (uint64, error) {
	var tok uint64
	if fn {
		err := s.c.QueryRowContext(ctx, fmt.Sprintf("SELECT `%s_fnext`(X'%x', X'6f')", chkTable, key)).Scan(&tok)
		return tok, err
	}
	var found int
	err := s.c.QueryRowContext(ctx, fmt.Sprintf("CALL `%s_next`(X'%x', X'6f')", chkTable, key)).Scan(&found, &tok)
	if err == nil && found != 1 {
		err = errors.New("no lock row")
	}
	return tok, err
}

func (s *session) exec(t *testing.T, q string) {
	t.Helper()
	if _, err := s.c.ExecContext(context.Background(), q); err != nil {
		t.Fatalf("%s: %v", q, err)
	}
}

type callResult struct {
	tok uint64
	err error
}

// start runs f in a goroutine.
func start(f func() (uint64, error)) chan callResult {
	ch := make(chan callResult, 1)
	go func() { tok, err := f(); ch <- callResult{tok, err} }()
	return ch
}

// within runs f on the session with id; if it has not answered within d,
// it is interrupted with KILL QUERY and reported blocked.
func within(t *testing.T, admin *sql.DB, id uint64, d time.Duration, f func() (uint64, error)) (blocked bool, r callResult) {
	t.Helper()
	ch := start(f)
	select {
	case r = <-ch:
		return false, r
	case <-time.After(d):
	}
	if _, err := admin.Exec(fmt.Sprintf("KILL QUERY %d", id)); err != nil {
		t.Fatal(err)
	}
	select {
	case r = <-ch:
	case <-time.After(5 * time.Second):
		t.Fatal("no answer 5 s after KILL QUERY")
	}
	return true, r
}

// waitLockWait waits (at most 3 s) until session id waits for a row lock.
// INNODB_TRX is a cache that a read refreshes only when the previous read
// was at least 100 ms before: polled faster, it never changes.
func waitLockWait(t *testing.T, admin *sql.DB, id uint64) {
	t.Helper()
	for range 20 {
		var n int
		if err := admin.QueryRow("SELECT COUNT(*) FROM information_schema.INNODB_TRX WHERE trx_mysql_thread_id = ? AND trx_state = 'LOCK WAIT'", id).Scan(&n); err != nil {
			t.Fatal(err)
		}
		if n == 1 {
			return
		}
		time.Sleep(150 * time.Millisecond)
	}
	rows, _ := admin.Query("SELECT trx_mysql_thread_id, trx_state FROM information_schema.INNODB_TRX")
	for rows != nil && rows.Next() {
		var i uint64
		var st string
		_ = rows.Scan(&i, &st)
		t.Logf("trx %d %s", i, st)
	}
	t.Fatalf("session %d never waited for the row lock", id)
}

func liveToken(t *testing.T, admin *sql.DB, key string) uint64 {
	t.Helper()
	var tok uint64
	if err := admin.QueryRow(fmt.Sprintf("SELECT token FROM `%s_live` WHERE name = X'%x'", chkTable, key)).Scan(&tok); err != nil {
		t.Fatal(err)
	}
	return tok
}

// setUpChk makes the checks' table, procedure and function, and keys
// with a lock row and a live counter.
func setUpChk(t *testing.T, admin *sql.DB, keys ...string) {
	t.Helper()
	ctx := context.Background()
	if err := setUpProc(ctx, admin, chkTable); err != nil {
		t.Fatal(err)
	}
	if _, err := admin.Exec(funcDDL(chkTable)); err != nil {
		t.Fatal(err)
	}
	for _, k := range keys {
		for _, q := range []string{
			fmt.Sprintf("INSERT IGNORE INTO `%s` (name) VALUES (X'%x')", chkTable, k),
			fmt.Sprintf("INSERT INTO `%s_live` (name, token, owner, holder_id, granted_at) VALUES (X'%x', %d, '', 0, NOW(6)) "+
				"ON DUPLICATE KEY UPDATE token = token", chkTable, k, 1<<24|1),
		} {
			if _, err := admin.Exec(q); err != nil {
				t.Fatal(err)
			}
		}
	}
}

// TestProcWaitScope: while a session holds key A's row lock and another
// session's CALL for A waits for it, a CALL for key B, an autocommit
// increment of B's live counter and a read of A's are not blocked (each
// answers within 1 s), and the waiting CALL gets the next token when the
// holder commits. The same check with a stored function instead must find
// them blocked (prelocking: the MEMORY table is locked for the whole
// calling statement), which shows that the check can fail.
func TestProcWaitScope(t *testing.T) {
	admin := openDefault(addr)
	defer admin.Close()
	for _, fn := range []bool{false, true} {
		name := map[bool]string{false: "procedure", true: "function"}[fn]
		t.Run(name, func(t *testing.T) {
			a, b := "scope-a-"+name, "scope-b-"+name
			setUpChk(t, admin, a, b)
			ctx := context.Background()
			h, w, o := openSession(t, admin, 10), openSession(t, admin, 10), openSession(t, admin, 10)
			t0, err := h.call(ctx, fn, a)
			if err != nil {
				t.Fatal(err)
			}
			waiting := start(func() (uint64, error) { return w.call(ctx, fn, a) })
			waitLockWait(t, admin, w.id)

			blockedCall, r := within(t, admin, o.id, time.Second, func() (uint64, error) { return o.call(ctx, fn, b) })
			o.exec(t, "COMMIT")
			if !blockedCall && r.err != nil {
				t.Fatalf("CALL for key B: %v", r.err)
			}
			inc, err := admin.Conn(ctx)
			if err != nil {
				t.Fatal(err)
			}
			defer inc.Close()
			var incID uint64
			if err := inc.QueryRowContext(ctx, "SELECT CONNECTION_ID()").Scan(&incID); err != nil {
				t.Fatal(err)
			}
			blockedInc, r := within(t, admin, incID, time.Second, func() (uint64, error) {
				_, err := inc.ExecContext(ctx, fmt.Sprintf("UPDATE `%s_live` SET token = token + 1 WHERE name = X'%x'", chkTable, b))
				return 0, err
			})
			if !blockedInc && r.err != nil {
				t.Fatalf("increment of key B's counter: %v", r.err)
			}
			blockedRead, r := within(t, admin, incID, time.Second, func() (uint64, error) {
				var tok uint64
				err := inc.QueryRowContext(ctx, fmt.Sprintf("SELECT token FROM `%s_live` WHERE name = X'%x'", chkTable, a)).Scan(&tok)
				return tok, err
			})
			if !blockedRead && r.err != nil {
				t.Fatalf("read of key A's counter: %v", r.err)
			}
			t.Logf("%s: while a wait for A is queued: CALL for B blocked %v, B's increment blocked %v, read of A's counter blocked %v",
				name, blockedCall, blockedInc, blockedRead)
			if want := fn; blockedCall != want || blockedInc != want || blockedRead != want {
				t.Errorf("%s: blocked: CALL for B %v, B's increment %v, read of A's counter %v; want %v",
					name, blockedCall, blockedInc, blockedRead, want)
			}

			h.exec(t, "COMMIT")
			select {
			case r := <-waiting:
				if r.err != nil || r.tok != t0+1 {
					t.Errorf("the waiting CALL for A after the holder's COMMIT: token %d, %v; want %d", r.tok, r.err, t0+1)
				}
			case <-time.After(2 * time.Second):
				t.Fatal("the waiting CALL for A was not granted within 2 s of the holder's COMMIT")
			}
			w.exec(t, "COMMIT")
		})
	}
}

// TestProcInterrupted: a CALL waiting for the row lock that is ended by
// KILL QUERY (how sqllock ends a wait whose ctx ended) or by the session's
// innodb_lock_wait_timeout fails with 1317 or 1205, leaves the live
// counter as it was, and leaves the session usable: its next CALL, once
// the holder commits, gets the next token.
func TestProcInterrupted(t *testing.T) {
	admin := openDefault(addr)
	defer admin.Close()
	for _, how := range []string{"kill", "timeout"} {
		t.Run(how, func(t *testing.T) {
			a := "interrupt-" + how
			setUpChk(t, admin, a)
			ctx := context.Background()
			lwt := 10
			if how == "timeout" {
				lwt = 1
			}
			h, w := openSession(t, admin, 10), openSession(t, admin, lwt)
			t0, err := h.call(ctx, false, a)
			if err != nil {
				t.Fatal(err)
			}
			waiting := start(func() (uint64, error) { return w.call(ctx, false, a) })
			waitLockWait(t, admin, w.id)
			want := uint16(1205)
			if how == "kill" {
				want = 1317
				if _, err := admin.Exec(fmt.Sprintf("KILL QUERY %d", w.id)); err != nil {
					t.Fatal(err)
				}
			}
			var r callResult
			select {
			case r = <-waiting:
			case <-time.After(5 * time.Second):
				t.Fatal("the waiting CALL did not end within 5 s")
			}
			var me *mysql.MySQLError
			if !errors.As(r.err, &me) || me.Number != want {
				t.Fatalf("the interrupted CALL: token %d, error %v; want server error %d", r.tok, r.err, want)
			}
			if got := liveToken(t, admin, a); got != t0 {
				t.Errorf("live counter after the interrupted CALL: %d, want %d (unchanged)", got, t0)
			}
			w.exec(t, "ROLLBACK") // as sqllock does after a failed wait
			h.exec(t, "COMMIT")
			tok, err := w.call(ctx, false, a)
			if err != nil || tok != t0+1 {
				t.Errorf("the interrupted session's next CALL: token %d, %v; want %d", tok, err, t0+1)
			}
			w.exec(t, "COMMIT")
		})
	}
}
