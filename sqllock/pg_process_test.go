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
	"github.com/distlock/distlock/sandbox"
	"github.com/distlock/distlock/sqllock"
)

// envPG selects the PostgreSQL holder in TestHelperPGHolder.
const envPG = "SQLLOCK_HELPER_PG"

// TestHelperPGHolder is not a test: it is TestHelperHolder for
// PostgreSQL, the body of the child process of the PostgreSQL SIGKILL and
// SIGSTOP tests (its fenced writes in PostgreSQL's placeholders).
func TestHelperPGHolder(t *testing.T) {
	url := os.Getenv(envURL)
	if url == "" || os.Getenv(envPG) == "" {
		t.Skip("only run as a child process by the PostgreSQL SIGKILL and SIGSTOP tests")
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
	db, err := sql.Open("pgx", os.Getenv(envDSN))
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
			n, err := pgFencedWrite(ctx, db, resID, le.Token(), "child")
			fmt.Printf("wrote %d %v lease=%v\n", n, err, le.Err())
		}
	}
}

// pgFencedWrite is fencedWrite in PostgreSQL.
func pgFencedWrite(ctx context.Context, db *sql.DB, id int, token uint64, val string) (int64, error) {
	res, err := db.ExecContext(ctx, "UPDATE "+resourceTable+" SET val = $1, token = $2 WHERE id = $3 AND token < $2", val, int64(token), id)
	if err != nil {
		return 0, err
	}
	return res.RowsAffected()
}

// startPGChild starts a PostgreSQL child process that acquires key
// (waiting if needed).
func startPGChild(t *testing.T, s *pgServer, key string, ttl time.Duration, resID int) *child {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^TestHelperPGHolder$", "-test.count=1")
	cmd.Env = append(os.Environ(),
		envPG+"=1",
		envURL+"="+sandbox.PostgresURL(s.addr())+"&table="+testTable,
		envDSN+"="+sandbox.PostgresURL(s.addr()),
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

func startPGHolder(t *testing.T, s *pgServer, key string, ttl time.Duration, resID int) (*child, uint64) {
	t.Helper()
	c := startPGChild(t, s, key, ttl, resID)
	line := c.line(t, "held ")
	tok, err := strconv.ParseUint(strings.Fields(line)[1], 10, 64)
	if err != nil {
		t.Fatalf("holder said %q", line)
	}
	return c, tok
}

func newPGLocker(t *testing.T, s *pgServer, ttl time.Duration) *distlock.Locker {
	t.Helper()
	d, _ := newPGDriver(t, s, sqllock.Options{})
	l := distlock.New(d, distlock.WithDefaultTTL(ttl))
	t.Cleanup(func() { _ = l.Close() })
	return l
}

// TestPostgresHolderSIGKILL: a holder process killed with SIGKILL frees
// the lock as soon as the server sees its connection close, long before
// its TTL.
func TestPostgresHolderSIGKILL(t *testing.T) {
	s := startPG(t)
	const ttl = 20 * time.Second
	key := uniqueKey("pg-sigkill")
	c, tok := startPGHolder(t, s, key, ttl, 0)
	l := newPGLocker(t, s, ttl)
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

// TestPostgresSilentHolder: a holder process that is paused (SIGSTOP)
// keeps its TCP connection open but stops refreshing; the server's
// idle_in_transaction_session_timeout ends its session within the TTL, the
// next holder gets the lock, and the paused holder's fenced write, once it
// resumes, is rejected.
func TestPostgresSilentHolder(t *testing.T) {
	s := startPG(t)
	const ttl = 2 * time.Second
	resID := int(time.Now().UnixNano() % 1e9)
	mustExec(t, s.admin, "CREATE TABLE IF NOT EXISTS "+resourceTable+" (id INT PRIMARY KEY, val VARCHAR(64) NOT NULL, token BIGINT NOT NULL)")
	mustExec(t, s.admin, "INSERT INTO "+resourceTable+" VALUES ($1, '', 0)", resID)
	key := uniqueKey("pg-silent")
	c, tok := startPGHolder(t, s, key, ttl, resID)
	if err := c.cmd.Process.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	paused := time.Now()
	l := newPGLocker(t, s, ttl)
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
	if n, err := pgFencedWrite(ctxFor(t, 10*time.Second), s.admin, resID, le.Token(), "new holder"); err != nil || n != 1 {
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
}

// TestPostgresWaiterSIGKILL: a process killed while it waits in the
// server leaves no waiter behind that could take the lock once it is
// released.
func TestPostgresWaiterSIGKILL(t *testing.T) {
	s := startPG(t)
	key := uniqueKey("pg-deadwaiter")
	holder, third := newPGLocker(t, s, 5*time.Second), newPGLocker(t, s, 5*time.Second)
	le := mustAcquire(t, holder, key)
	c := startPGChild(t, s, key, 5*time.Second, 0)
	var waiting int
	for deadline := time.Now().Add(20 * time.Second); waiting == 0 && time.Now().Before(deadline); {
		time.Sleep(20 * time.Millisecond)
		err := s.admin.QueryRowContext(ctxFor(t, 10*time.Second),
			"SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock' AND query LIKE '%FOR UPDATE%' AND pid <> pg_backend_pid()").Scan(&waiting)
		if err != nil {
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
