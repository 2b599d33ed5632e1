package sqllock_test

import (
	"testing"
	"time"

	"github.com/distlock/distlock/backend"
	"github.com/distlock/distlock/sqllock"
)

// TestStatementTimeoutWait: a server-wide statement time limit
// (MariaDB's max_statement_time) shorter than a blocking wait ends the
// locking read as innodb_lock_wait_timeout does; the wait goes on within
// the caller's ctx instead of failing, and is granted when the holder
// releases.
func TestStatementTimeoutWait(t *testing.T) { allModes(t, testStatementTimeoutWait) }

func testStatementTimeoutWait(t *testing.T, m mode) {
	s := startServer(t)
	var old float64
	if err := s.admin.QueryRowContext(ctxFor(t, 10*time.Second), "SELECT @@GLOBAL.max_statement_time").Scan(&old); err != nil {
		t.Skipf("no max_statement_time on this server: %v", err)
	}
	if _, err := s.admin.ExecContext(ctxFor(t, 10*time.Second), "SET GLOBAL max_statement_time = 0.5"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_, _ = s.admin.ExecContext(ctxFor(t, 10*time.Second), "SET GLOBAL max_statement_time = ?", old)
	})
	holder, _ := newDriverMode(t, s, sqllock.Options{}, m) // new sessions: the global value
	waiter, _ := newDriverMode(t, s, sqllock.Options{}, m)
	key := uniqueKey("stmttime")
	req := func(owner string) backend.Request {
		return backend.Request{Key: key, Owner: owner, TTL: 10 * time.Second}
	}
	g, err := holder.TryAcquire(ctxFor(t, 10*time.Second), req("owner-holder-0123456789ab"))
	if err != nil {
		t.Fatal(err)
	}
	time.AfterFunc(1500*time.Millisecond, func() { _ = g.Lock.Release(ctxFor(t, 10*time.Second)) })
	g2, err := waiter.Wait(ctxFor(t, 10*time.Second), req("owner-waiter-0123456789ab"))
	if err != nil {
		t.Fatalf("Wait across a 0.5 s max_statement_time, holder releasing after 1.5 s: %v, want a grant", err)
	}
	_ = g2.Lock.Release(ctxFor(t, 10*time.Second))
}
