package sqllock_test

import (
	"database/sql"
	"syscall"
	"testing"
	"time"

	"github.com/distlock/distlock/backend"
	"github.com/distlock/distlock/sqllock"
	"github.com/jackc/pgx/v5/stdlib"
)

// newAsyncCommitDB is newDB whose sessions run with synchronous_commit
// off, as a server, database or role may set it.
func (s *server) newAsyncCommitDB() *sql.DB {
	cfg := s.pgConfig(s.addr, nil)
	cfg.RuntimeParams["synchronous_commit"] = "off"
	return stdlib.OpenDB(*cfg)
}

// TestPostgresTokensAsyncCommit: a new durable epoch (and a read-write
// lock's write token) is flushed to the WAL before its token is returned
// even when the sessions' synchronous_commit is off: a crash right after
// the grant (the WAL writer stopped, so nothing else flushed the commit
// meanwhile) does not lose it, and the next grant's token is above it.
// Local provider only (the WAL writer is stopped by its pid).
func TestPostgresTokensAsyncCommit(t *testing.T) {
	s := startPG(t)
	if !s.local() {
		t.Skipf("signals the WAL writer by its pid: local provider only (this is %q)", s.provider())
	}
	db := s.newAsyncCommitDB()
	defer db.Close()
	d, err := sqllock.New(ctxFor(t, 30*time.Second), db, &sqllock.Options{Table: testTable})
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	key, rwKey := uniqueKey("pg-async"), uniqueKey("pg-async-rw")
	req := func(key string) backend.Request {
		return backend.Request{Key: key, Owner: "owner-async-0123456789ab", TTL: 10 * time.Second}
	}

	// The tables New created are on disk (the server may be new).
	if _, err := s.admin.ExecContext(ctxFor(t, 30*time.Second), "CHECKPOINT"); err != nil {
		t.Fatal(err)
	}
	var walwriter int
	if err := s.admin.QueryRowContext(ctxFor(t, 10*time.Second),
		"SELECT pid FROM pg_stat_activity WHERE backend_type = 'walwriter'").Scan(&walwriter); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Kill(walwriter, syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	stopped := true
	defer func() {
		if stopped { // not killed with the server: let it go on
			_ = syscall.Kill(walwriter, syscall.SIGCONT)
		}
	}()

	g, err := d.TryAcquire(ctxFor(t, 10*time.Second), req(key))
	if err != nil {
		t.Fatal(err)
	}
	before := g.Token
	_ = g.Lock.Release(ctxFor(t, 10*time.Second))
	g, err = d.TryAcquire(ctxFor(t, 10*time.Second), kindReq(req(rwKey), backend.Write, false))
	if err != nil {
		t.Fatal(err)
	}
	rwBefore := g.Token
	_ = g.Lock.Release(ctxFor(t, 10*time.Second))

	ctx := ctxFor(t, 3*time.Minute)
	if err := s.kill(ctx); err != nil {
		t.Fatal(err)
	}
	stopped = false
	if err := s.start(ctx); err != nil {
		t.Fatal(err)
	}
	retry(t, func() error {
		g, err = d.TryAcquire(ctxFor(t, 10*time.Second), req(key))
		return err
	})
	_ = g.Lock.Release(ctxFor(t, 10*time.Second))
	if g.Token <= before {
		t.Errorf("lock token %d after the crash, not above %d granted before it (its epoch's commit was lost)", g.Token, before)
	}
	g, err = d.TryAcquire(ctxFor(t, 10*time.Second), kindReq(req(rwKey), backend.Write, false))
	if err != nil {
		t.Fatal(err)
	}
	_ = g.Lock.Release(ctxFor(t, 10*time.Second))
	if g.Token <= rwBefore {
		t.Errorf("read-write lock's write token %d after the crash, not above %d granted before it (its commit was lost)", g.Token, rwBefore)
	}
}
