package sqllock_test

import (
	"bufio"
	"context"
	"database/sql"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/distlock/distlock"
	"github.com/distlock/distlock/sqllock"
)

// The holder process: TestHelperHolder re-run in a child process with
// these variables set.
const (
	envURL = "SQLLOCK_HELPER_URL"
	envDSN = "SQLLOCK_HELPER_DSN"
	envSQL = "SQLLOCK_HELPER_DRIVER" // the database/sql driver of envDSN: mysql or pgx
	envKey = "SQLLOCK_HELPER_KEY"
	envTTL = "SQLLOCK_HELPER_TTL"
	envRes = "SQLLOCK_HELPER_RESOURCE"
)

const resourceTable = "distlock_test_resource"

// procServer is what the process tests need of a row's server: how the
// child reaches it, a Locker of the test's own, the protected resource's
// fenced write, and the query that counts sessions waiting in the server
// for a lock's row.
type procServer struct {
	pg        bool // PostgreSQL, else MySQL
	admin     *sql.DB
	url, dsn  string // the child's Locker URL and its resource pool's DSN
	sqlDriver string // database/sql driver name of dsn
	newLocker func(t *testing.T, ttl time.Duration) *distlock.Locker
	// resource creates the resource table and its row id.
	resource func(t *testing.T, id int)
	waiting  string // counts sessions waiting for a row lock FOR UPDATE
}

func procServerOf(t *testing.T, d *dialect) *procServer {
	s := d.server(t)
	sep := "?"
	if s.pg {
		sep = "&"
	}
	ps := &procServer{
		pg: s.pg, admin: s.admin, sqlDriver: s.sqlDriver(),
		url: s.url() + sep + "table=" + d.table(), dsn: s.dsn(),
		newLocker: func(t *testing.T, ttl time.Duration) *distlock.Locker {
			l, _ := d.newLocker(t, s, ttl, sqllock.Options{})
			return l
		},
		resource: func(t *testing.T, id int) {
			mustExec(t, s.admin, d.sql("CREATE TABLE IF NOT EXISTS "+resourceTable+" (id INT PRIMARY KEY, val VARCHAR(64) NOT NULL, token BIGINT"+map[bool]string{false: " UNSIGNED", true: ""}[s.pg]+" NOT NULL)"))
			mustExec(t, s.admin, d.sql("INSERT INTO "+resourceTable+" VALUES (?, '', 0)"), id)
		},
		waiting: "SELECT COUNT(*) FROM information_schema.PROCESSLIST WHERE COMMAND = 'Query' AND ID <> CONNECTION_ID() " +
			"AND INFO LIKE 'SELECT % FROM `" + d.table() + "` WHERE name = %FOR UPDATE%'",
	}
	if s.pg {
		ps.waiting = "SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock' AND query LIKE '%FOR UPDATE%' AND pid <> pg_backend_pid()"
	}
	return ps
}

// TestHelperHolder is not a test: it is the body of the child process that
// holds a lock for the SIGKILL and SIGSTOP tests. It acquires the key,
// prints "held TOKEN", and on each "write" line from stdin attempts a
// fenced write with its token, printing "wrote N" (N rows changed).
func TestHelperHolder(t *testing.T) {
	url := os.Getenv(envURL)
	if url == "" {
		t.Skip("only run as a child process by the SIGKILL and SIGSTOP tests")
	}
	ttl, _ := time.ParseDuration(os.Getenv(envTTL))
	resID, _ := strconv.Atoi(os.Getenv(envRes))
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	l, err := distlock.Open(ctx, url, distlock.WithDefaultTTL(ttl))
	if err != nil {
		fmt.Printf("error %v\n", err)
		return
	}
	defer l.Close()
	db, err := sql.Open(os.Getenv(envSQL), os.Getenv(envDSN))
	if err != nil {
		fmt.Printf("error %v\n", err)
		return
	}
	defer db.Close()
	le, err := l.Acquire(ctx, os.Getenv(envKey))
	if err != nil {
		fmt.Printf("error %v\n", err)
		return
	}
	fmt.Printf("held %d\n", le.Token())
	in := bufio.NewScanner(os.Stdin)
	for in.Scan() {
		if in.Text() == "write" {
			n, err := fencedWrite(ctx, db, os.Getenv(envSQL) == "pgx", resID, le.Token(), "child")
			fmt.Printf("wrote %d %v lease=%v\n", n, err, le.Err())
		}
	}
}

// fencedWrite is the protected resource's check: a write carrying a token
// lower than one already seen changes nothing; pg selects PostgreSQL's
// placeholders.
func fencedWrite(ctx context.Context, db *sql.DB, pg bool, id int, token uint64, val string) (int64, error) {
	q, args := "UPDATE "+resourceTable+" SET val = ?, token = ? WHERE id = ? AND token < ?", []any{val, token, id, token}
	if pg {
		q, args = "UPDATE "+resourceTable+" SET val = $1, token = $2 WHERE id = $3 AND token < $2", []any{val, int64(token), id}
	}
	res, err := db.ExecContext(ctx, q, args...)
	if err != nil {
		return 0, err
	}
	return res.RowsAffected()
}

// child is a running holder process.
type child struct {
	cmd   *exec.Cmd
	stdin io.WriteCloser
	out   *bufio.Scanner
}

// startChild starts a child process that acquires key (waiting if needed).
func (s *procServer) startChild(t *testing.T, key string, ttl time.Duration, resID int) *child {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^TestHelperHolder$", "-test.count=1")
	cmd.Env = append(os.Environ(),
		envURL+"="+s.url, envDSN+"="+s.dsn, envSQL+"="+s.sqlDriver,
		envKey+"="+key, envTTL+"="+ttl.String(), envRes+"="+strconv.Itoa(resID))
	cmd.Stderr = os.Stderr
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	c := &child{cmd: cmd, stdin: stdin, out: bufio.NewScanner(stdout)}
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGCONT)
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	})
	return c
}

// startHolder starts a child process that holds key, and returns it with
// its token.
func (s *procServer) startHolder(t *testing.T, key string, ttl time.Duration, resID int) (*child, uint64) {
	t.Helper()
	c := s.startChild(t, key, ttl, resID)
	line := c.line(t, "held ")
	tok, err := strconv.ParseUint(strings.Fields(line)[1], 10, 64)
	if err != nil {
		t.Fatalf("holder said %q", line)
	}
	return c, tok
}

// line reads the child's output until a line starting with prefix.
func (c *child) line(t *testing.T, prefix string) string {
	t.Helper()
	for c.out.Scan() {
		l := c.out.Text()
		if strings.HasPrefix(l, prefix) {
			return l
		}
		if strings.HasPrefix(l, "error ") {
			t.Fatalf("holder process: %s", l)
		}
	}
	t.Fatalf("holder process ended without printing %q", prefix)
	return ""
}

// TestHolderSIGKILL: a holder process killed with SIGKILL frees the lock as
// soon as the server sees its connection close, long before its TTL.
func TestHolderSIGKILL(t *testing.T) {
	eachDialect(t, mysqlProc|pgRow, func(t *testing.T, d *dialect) { testHolderSIGKILL(t, procServerOf(t, d)) })
}

func testHolderSIGKILL(t *testing.T, s *procServer) {
	const ttl = 20 * time.Second
	key := uniqueKey("sigkill")
	c, tok := s.startHolder(t, key, ttl, 0)
	l := s.newLocker(t, ttl)
	if _, err := l.TryAcquire(ctxFor(t, 10*time.Second), key); err == nil {
		t.Fatal("the key was free while the child process held it")
	}
	killed := time.Now()
	if err := c.cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	le, err := l.Acquire(ctxFor(t, 2*ttl), key)
	took := time.Since(killed)
	if err != nil {
		t.Fatalf("Acquire after the holder was killed: %v", err)
	}
	defer release(t, le)
	t.Logf("SIGKILL of the holder to the next grant: %v (TTL %v); tokens %d then %d", took, ttl, tok, le.Token())
	if took >= ttl/2 {
		t.Errorf("the next holder waited %v: the lock was freed by a timeout, not by the connection closing", took)
	}
	if le.Token() <= tok {
		t.Errorf("token %d after the killed holder's %d", le.Token(), tok)
	}
}

// TestSilentHolder: a holder process that is paused (SIGSTOP) keeps its TCP
// connection open but stops refreshing; the server ends its session within
// the TTL (MySQL's wait_timeout, PostgreSQL's
// idle_in_transaction_session_timeout), the next holder gets the lock, and
// the paused holder's fenced write, once it resumes, is rejected.
func TestSilentHolder(t *testing.T) {
	// One server at a time: the bound (TTL + 1 s) leaves little to a
	// loaded machine, and the rows take 2 s each.
	eachDialectSerial(t, mysqlProc|pgRow, func(t *testing.T, d *dialect) { testSilentHolder(t, procServerOf(t, d)) })
}

func testSilentHolder(t *testing.T, s *procServer) {
	const ttl = 2 * time.Second
	resID := int(time.Now().UnixNano() % 1e9)
	s.resource(t, resID)
	key := uniqueKey("silent")
	c, tok := s.startHolder(t, key, ttl, resID)
	if err := c.cmd.Process.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	paused := time.Now()
	l := s.newLocker(t, ttl)
	le, err := l.Acquire(ctxFor(t, 10*ttl), key)
	took := time.Since(paused)
	if err != nil {
		t.Fatalf("Acquire while the holder is paused: %v", err)
	}
	defer release(t, le)
	t.Logf("SIGSTOP of the holder to the next grant: %v (TTL %v)", took, ttl)
	// The server's bound: the last refresh (at most TTL/3 before the pause)
	// plus the idle timeout (the TTL in whole seconds); one second of slack
	// for the server's timer and a busy machine.
	if took > ttl+time.Second {
		t.Errorf("a silent holder kept the lock %v after it went silent, beyond its TTL %v", took, ttl)
	}
	if le.Token() <= tok {
		t.Fatalf("token %d after the silent holder's %d", le.Token(), tok)
	}
	if n, err := fencedWrite(ctxFor(t, 10*time.Second), s.admin, s.pg, resID, le.Token(), "new holder"); err != nil || n != 1 {
		t.Fatalf("the new holder's fenced write: %d rows, %v", n, err)
	}
	if err := c.cmd.Process.Signal(syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	if _, err := io.WriteString(c.stdin, "write\n"); err != nil {
		t.Fatal(err)
	}
	line := c.line(t, "wrote ")
	t.Logf("the resumed holder: %s", line)
	if !strings.HasPrefix(line, "wrote 0 ") {
		t.Errorf("the stale holder's fenced write was accepted: %s", line)
	}
	if !strings.Contains(line, "lost") {
		t.Logf("the resumed holder had not yet noticed the loss when it wrote (the fence caught it)")
	}
}

// TestWaiterSIGKILL: a process killed while it waits in the server leaves
// no waiter behind that could take the lock once it is released.
func TestWaiterSIGKILL(t *testing.T) {
	eachDialect(t, mysqlProc|pgRow, func(t *testing.T, d *dialect) { testWaiterSIGKILL(t, procServerOf(t, d)) })
}

func testWaiterSIGKILL(t *testing.T, s *procServer) {
	key := uniqueKey("deadwaiter")
	holder, third := s.newLocker(t, 5*time.Second), s.newLocker(t, 5*time.Second)
	le := mustAcquire(t, holder, key)
	c := s.startChild(t, key, 5*time.Second, 0)
	// Wait until the child is blocked in the server (its FOR UPDATE waits).
	var waiting int
	for deadline := time.Now().Add(20 * time.Second); waiting == 0 && time.Now().Before(deadline); {
		time.Sleep(20 * time.Millisecond)
		if err := s.admin.QueryRowContext(ctxFor(t, 10*time.Second), s.waiting).Scan(&waiting); err != nil {
			t.Fatal(err)
		}
	}
	if waiting == 0 {
		t.Fatal("the child process never waited for the lock in the server")
	}
	if err := c.cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	_ = c.cmd.Wait()
	release(t, le)
	t0 := time.Now()
	var took time.Duration
	for time.Since(t0) < 10*time.Second {
		l2, err := third.TryAcquire(ctxFor(t, 10*time.Second), key)
		if err == nil {
			took = time.Since(t0)
			release(t, l2)
			break
		}
		time.Sleep(5 * time.Millisecond)
	}
	if took == 0 {
		t.Fatal("after the holder released, the killed waiter's session kept the lock for 10s")
	}
	t.Logf("the killed waiter's session held the released lock for at most %v", took)
}

func mustExec(t *testing.T, db *sql.DB, q string, args ...any) {
	t.Helper()
	if _, err := db.ExecContext(ctxFor(t, 30*time.Second), q, args...); err != nil {
		t.Fatalf("%s: %v", q, err)
	}
}
