package sqllock

import (
	"context"
	"database/sql"
	"errors"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/distlock/distlock/sandbox"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/stdlib"
)

// startPGDriver starts a PostgreSQL of the test's own and returns a
// *sql.DB over it and a row-mode Driver on table, closed when the test
// ends.
func startPGDriver(ctx context.Context, t *testing.T, table string) (*sql.DB, *Driver) {
	t.Helper()
	g := sandbox.StartT(t, sandbox.Spec{Kind: sandbox.Postgres, Logf: func(string, ...any) {}})
	cfg, err := pgx.ParseConfig(g.URL())
	if err != nil {
		t.Fatal(err)
	}
	db := stdlib.OpenDB(*cfg)
	t.Cleanup(func() { _ = db.Close() })
	d, err := newDriver(ctx, db, pgDialect{}, &Options{Table: table})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = d.Close() })
	return db, d
}

// TestPGTokenChecksHolder: PostgreSQL's fencing statement hands a token out
// only while the lock's transaction is in progress. Once it has ended (the
// holder's session died between the grant and the token), the increment
// still happens but the token is refused (errLostBeforeToken) and never
// handed out; the next holder's token is above it. The check relies on
// txid_status being volatile, evaluated on the row the increment returns
// (not folded to a constant before it), which is checked too.
func TestPGTokenChecksHolder(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	db, d := startPGDriver(ctx, t, "distlock_token_test")

	var vol string
	if err := db.QueryRowContext(ctx, "SELECT provolatile FROM pg_proc WHERE proname = 'txid_status'").Scan(&vol); err != nil || vol != "v" {
		t.Fatalf("txid_status provolatile = %q, %v; the fencing statement assumes volatile", vol, err)
	}

	c, err := db.Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	begin := func() uint64 {
		t.Helper()
		res, err := pgExec(ctx, c, "BEGIN; SELECT txid_current()")
		if err != nil {
			t.Fatal(err)
		}
		xid, err := strconv.ParseUint(string(res[1].Rows[0][0]), 10, 64)
		if err != nil {
			t.Fatal(err)
		}
		return xid
	}
	lc := &lockConn{d: d, id: 1}
	xid := begin()
	tok, err := pgDialect{}.token(ctx, lc, "k", "o", lockResult{found: true, xid: xid})
	if err != nil || tok != 1<<pgSeqBits|1 {
		t.Fatalf("token while the transaction is in progress: %d, %v; want 1<<32|1", tok, err)
	}
	if _, err := pgExec(ctx, c, "ROLLBACK"); err != nil {
		t.Fatal(err)
	}
	if tok, err := (pgDialect{}).token(ctx, lc, "k", "o", lockResult{found: true, xid: xid}); !errors.Is(err, errLostBeforeToken) {
		t.Fatalf("token for an ended transaction: %d, %v; want errLostBeforeToken", tok, err)
	}
	xid = begin()
	tok, err = pgDialect{}.token(ctx, lc, "k", "o", lockResult{found: true, xid: xid})
	if err != nil || tok != 1<<pgSeqBits|3 {
		t.Fatalf("the next token: %d, %v; want 1<<32|3 (|2 was burnt, never handed out)", tok, err)
	}
	_, _ = pgExec(ctx, c, "ROLLBACK")
}

// TestPGTokenConcurrentEpochs: token statements racing on a key with no
// live counter (first use, or a counter deleted meanwhile, as crash
// recovery does) each start or join an epoch without breaking the order:
// every token is distinct, and a token returned before another statement
// started is below that statement's. Each racer holds a transaction of its
// own in progress, as a holder does (the statement checks it).
func TestPGTokenConcurrentEpochs(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	db, d := startPGDriver(ctx, t, "distlock_epoch_race")

	const racers, rounds = 6, 15
	type call struct {
		start, end time.Time
		tok        uint64
	}
	var calls []call
	var mu sync.Mutex
	for r := range rounds {
		key := "race-" + strconv.Itoa(r%3) // later rounds find a live counter, or a deleted one
		if r%2 == 1 {
			if _, err := db.ExecContext(ctx, `DELETE FROM "distlock_epoch_race_live" WHERE name = $1`, []byte(key)); err != nil {
				t.Fatal(err)
			}
		}
		var wg sync.WaitGroup
		errs := make(chan error, racers)
		for i := range racers {
			wg.Add(1)
			go func() {
				defer wg.Done()
				c, err := db.Conn(ctx)
				if err != nil {
					errs <- err
					return
				}
				defer c.Close()
				res, err := pgExec(ctx, c, "BEGIN; SELECT txid_current()")
				if err != nil {
					errs <- err
					return
				}
				defer pgExec(ctx, c, "ROLLBACK") //nolint:errcheck
				xid, err := strconv.ParseUint(string(res[1].Rows[0][0]), 10, 64)
				if err != nil {
					errs <- err
					return
				}
				lc := &lockConn{d: d, id: uint64(i + 1)}
				start := time.Now()
				tok, err := pgDialect{}.token(ctx, lc, key, "o", lockResult{found: true, xid: xid})
				end := time.Now()
				if err != nil {
					errs <- err
					return
				}
				mu.Lock()
				calls = append(calls, call{start, end, tok | uint64(r%3)<<62})
				mu.Unlock()
			}()
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			t.Fatal(err)
		}
	}
	// Tokens of different keys are told apart by the key's index in the
	// top bits (real tokens stay below 1<<62 here).
	seen := map[uint64]bool{}
	for _, a := range calls {
		if seen[a.tok] {
			t.Errorf("token %#x handed out twice", a.tok)
		}
		seen[a.tok] = true
		for _, b := range calls {
			if a.tok>>62 == b.tok>>62 && a.end.Before(b.start) && a.tok >= b.tok {
				t.Errorf("token %#x returned before a statement started that got %#x", a.tok, b.tok)
			}
		}
	}
	t.Logf("%d tokens", len(calls))
}
