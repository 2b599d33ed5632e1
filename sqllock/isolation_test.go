package sqllock_test

import (
	"database/sql"
	"fmt"
	"testing"
	"time"

	"github.com/distlock/distlock/backend"
	"github.com/distlock/distlock/sqllock"
	"github.com/jackc/pgx/v5/stdlib"
)

// newIsolationDB is newDB whose sessions default to isolation iso, as a
// database or role may set it.
func (s *server) newIsolationDB(iso string) *sql.DB {
	cfg := s.pgConfig(s.addr, nil)
	cfg.RuntimeParams["default_transaction_isolation"] = iso
	return stdlib.OpenDB(*cfg)
}

// raceUnderIsolation runs, for each session default of repeatable read and
// serializable, a Driver's call (grant) while another transaction holds
// what its statement needs (block, on an admin connection): it waits until
// a statement of the Driver's (LIKE waitingLike) waits for a lock in the
// server, commits the other transaction, and returns the call's grant,
// which must not have failed (the statement starts again; the
// serialization failure that isolation would report is not the user's).
// With prior, the key is granted once first (its rows exist), and the
// call's token must be above that grant's and the other transaction's
// increment.
func raceUnderIsolation(t *testing.T, what string, block func(*sql.Tx, string) error, waitingLike string,
	grant func(d *sqllock.Driver, key string) (backend.Grant, error), prior bool) {
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
			key := uniqueKey("iso")
			var before uint64
			if prior {
				g, err := grant(d, key) // the key's rows exist from here
				if err != nil {
					t.Fatal(err)
				}
				before = g.Token
				_ = g.Lock.Release(ctxFor(t, 10*time.Second))
			}
			// (retry: the admin pool may hold a connection from before
			// another test's server restart.)
			var tx *sql.Tx
			retry(t, func() error {
				var err error
				if tx, err = s.admin.BeginTx(ctxFor(t, 10*time.Second), nil); err != nil {
					return err
				}
				if err = block(tx, key); err != nil {
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
				g, err := grant(d, key)
				done <- result{g, err}
			}()
			waiting := false
			for deadline := time.Now().Add(10 * time.Second); !waiting && time.Now().Before(deadline); {
				time.Sleep(10 * time.Millisecond)
				var n int
				err := s.admin.QueryRowContext(ctxFor(t, 10*time.Second),
					"SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock' AND query LIKE $1 AND datname = current_database()", waitingLike).Scan(&n)
				waiting = err == nil && n > 0 // an error: a connection from before a restart
			}
			if !waiting {
				t.Fatalf("%s did not wait for the other transaction", what)
			}
			if err := tx.Commit(); err != nil {
				t.Fatal(err)
			}
			r := <-done
			if r.err != nil {
				t.Fatalf("%s while another transaction held what it needs (default isolation %s): %v", what, iso, r.err)
			}
			_ = r.g.Lock.Release(ctxFor(t, 10*time.Second))
			if prior && r.g.Token <= before+1 {
				t.Errorf("token %d, want above %d (the other transaction's increment)", r.g.Token, before+1)
			}
		})
	}
}

// TestPostgresTokenIsolation: the fencing token's statement, which
// updates the key's live counter row, is not failed by a session default
// of repeatable read or serializable when another transaction updated
// that row while the statement waited for it (as a previous holder's
// token statement does when two grants' statements overlap, and
// concurrent semaphore holders' always can): it starts again.
func TestPostgresTokenIsolation(t *testing.T) {
	live := fmt.Sprintf(`"%s%s"`, testTable, sqllock.LiveSuffix)
	raceUnderIsolation(t, "the token statement",
		func(tx *sql.Tx, key string) error {
			_, err := tx.ExecContext(ctxFor(t, 10*time.Second), "UPDATE "+live+" SET token = token + 1 WHERE name = $1", []byte(key))
			return err
		}, "%_live%",
		func(d *sqllock.Driver, key string) (backend.Grant, error) {
			return d.TryAcquire(ctxFor(t, 10*time.Second), backend.Request{Key: key, Owner: "owner-iso-0123456789abcd", TTL: 10 * time.Second})
		}, true)
}

// TestPostgresEnsureIsolation: a first-time locker's row creation (INSERT
// ... ON CONFLICT DO NOTHING) that meets a row another session inserted
// and committed while it waited is not failed by a session default of
// repeatable read or serializable (which reports that row, invisible to
// the statement's snapshot, as a serialization failure): the row exists,
// and the wait goes on to take the lock.
func TestPostgresEnsureIsolation(t *testing.T) {
	raceUnderIsolation(t, "the row creation",
		func(tx *sql.Tx, key string) error {
			_, err := tx.ExecContext(ctxFor(t, 10*time.Second), `INSERT INTO "`+testTable+`" (name) VALUES ($1)`, []byte(key))
			return err
		}, "INSERT%",
		func(d *sqllock.Driver, key string) (backend.Grant, error) {
			return d.Wait(ctxFor(t, 10*time.Second), backend.Request{Key: key, Owner: "owner-iso-0123456789abcd", TTL: 10 * time.Second})
		}, false)
}
