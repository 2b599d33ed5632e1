package sqllock_test

import (
	"context"
	"database/sql"
	"fmt"
	"net"
	"testing"
	"time"

	"github.com/distlock/distlock/backend"
	"github.com/distlock/distlock/sandbox"
	"github.com/distlock/distlock/sqllock"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/stdlib"
)

// newIsolationDB is newDB whose sessions default to isolation iso, as a
// database or role may set it.
func (s *pgServer) newIsolationDB(iso string) *sql.DB {
	cfg, err := pgx.ParseConfig(sandbox.PostgresURL(s.addr()))
	if err != nil {
		panic(err)
	}
	cfg.ConnectTimeout = 5 * time.Second
	cfg.RuntimeParams["default_transaction_isolation"] = iso
	cfg.DialFunc = func(ctx context.Context, _, _ string) (net.Conn, error) {
		var d net.Dialer
		return d.DialContext(ctx, "tcp", s.addr())
	}
	return stdlib.OpenDB(*cfg)
}

// TestPostgresTokenIsolation: the fencing token's statement, which
// updates the key's live counter row, is not failed by a session default
// of repeatable read or serializable when another transaction updated
// that row while the statement waited for it (as a previous holder's
// token statement does when two grants' statements overlap, and
// concurrent semaphore holders' always can): it starts again.
func TestPostgresTokenIsolation(t *testing.T) {
	s := startPG(t)
	for _, iso := range []string{"repeatable read", "serializable"} {
		t.Run(iso, func(t *testing.T) {
			db := s.newIsolationDB(iso)
			defer db.Close()
			d, err := sqllock.New(ctxFor(t, 30*time.Second), db, &sqllock.Options{Table: testTable})
			if err != nil {
				t.Fatal(err)
			}
			defer d.Close()
			key := uniqueKey("pg-iso")
			req := backend.Request{Key: key, Owner: "owner-iso-0123456789abcd", TTL: 10 * time.Second}
			g, err := d.TryAcquire(ctxFor(t, 10*time.Second), req) // the live row exists from here
			if err != nil {
				t.Fatal(err)
			}
			before := g.Token
			_ = g.Lock.Release(ctxFor(t, 10*time.Second))

			// Another transaction updates the live row and commits while
			// the next grant's token statement waits for it.
			// (pgRetry: the admin pool may hold a connection from before
			// another test's server restart.)
			live := fmt.Sprintf(`"%s%s"`, testTable, sqllock.LiveSuffix)
			var tx *sql.Tx
			pgRetry(t, func() error {
				var err error
				if tx, err = s.admin.BeginTx(ctxFor(t, 10*time.Second), nil); err != nil {
					return err
				}
				_, err = tx.ExecContext(ctxFor(t, 10*time.Second), "UPDATE "+live+" SET token = token + 1 WHERE name = $1", []byte(key))
				if err != nil {
					_ = tx.Rollback()
				}
				return err
			})
			defer func() { _ = tx.Rollback() }()
			type result struct {
				g   backend.Grant
				err error
			}
			done := make(chan result, 1)
			go func() {
				g, err := d.TryAcquire(ctxFor(t, 10*time.Second), req)
				done <- result{g, err}
			}()
			waiting := false
			for deadline := time.Now().Add(10 * time.Second); !waiting && time.Now().Before(deadline); {
				time.Sleep(10 * time.Millisecond)
				var n int
				err := s.admin.QueryRowContext(ctxFor(t, 10*time.Second),
					"SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock' AND query LIKE '%_live%' AND datname = current_database()").Scan(&n)
				waiting = err == nil && n > 0 // an error: a connection from before a restart
			}
			if !waiting {
				t.Fatal("the token statement did not wait for the live row")
			}
			if err := tx.Commit(); err != nil {
				t.Fatal(err)
			}
			r := <-done
			if r.err != nil {
				t.Fatalf("TryAcquire while another transaction updated the live row (default isolation %s): %v", iso, r.err)
			}
			_ = r.g.Lock.Release(ctxFor(t, 10*time.Second))
			if r.g.Token <= before+1 {
				t.Errorf("token %d, want above %d (the other transaction's increment)", r.g.Token, before+1)
			}
		})
	}
}

// TestPostgresEnsureIsolation: a first-time locker's row creation (INSERT
// ... ON CONFLICT DO NOTHING) that meets a row another session inserted
// and committed while it waited is not failed by a session default of
// repeatable read or serializable (which reports that row, invisible to
// the statement's snapshot, as a serialization failure): the row exists,
// and the wait goes on to take the lock.
func TestPostgresEnsureIsolation(t *testing.T) {
	s := startPG(t)
	for _, iso := range []string{"repeatable read", "serializable"} {
		t.Run(iso, func(t *testing.T) {
			db := s.newIsolationDB(iso)
			defer db.Close()
			d, err := sqllock.New(ctxFor(t, 30*time.Second), db, &sqllock.Options{Table: testTable})
			if err != nil {
				t.Fatal(err)
			}
			defer d.Close()
			key := uniqueKey("pg-iso-ensure")
			var tx *sql.Tx
			pgRetry(t, func() error {
				var err error
				if tx, err = s.admin.BeginTx(ctxFor(t, 10*time.Second), nil); err != nil {
					return err
				}
				_, err = tx.ExecContext(ctxFor(t, 10*time.Second), `INSERT INTO "`+testTable+`" (name) VALUES ($1)`, []byte(key))
				if err != nil {
					_ = tx.Rollback()
				}
				return err
			})
			defer func() { _ = tx.Rollback() }()
			type result struct {
				g   backend.Grant
				err error
			}
			done := make(chan result, 1)
			go func() {
				g, err := d.Wait(ctxFor(t, 10*time.Second), backend.Request{Key: key, Owner: "owner-iso-0123456789abcd", TTL: 10 * time.Second})
				done <- result{g, err}
			}()
			waiting := false
			for deadline := time.Now().Add(10 * time.Second); !waiting && time.Now().Before(deadline); {
				time.Sleep(10 * time.Millisecond)
				var n int
				err := s.admin.QueryRowContext(ctxFor(t, 10*time.Second),
					"SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock' AND query LIKE 'INSERT%' AND datname = current_database()").Scan(&n)
				waiting = err == nil && n > 0
			}
			if !waiting {
				t.Fatal("the row creation did not wait for the other session's insert")
			}
			if err := tx.Commit(); err != nil {
				t.Fatal(err)
			}
			r := <-done
			if r.err != nil {
				t.Fatalf("Wait on a key whose row another session created meanwhile (default isolation %s): %v", iso, r.err)
			}
			_ = r.g.Lock.Release(ctxFor(t, 10*time.Second))
		})
	}
}
