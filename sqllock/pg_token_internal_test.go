package sqllock

import (
	"context"
	"errors"
	"strconv"
	"testing"
	"time"

	"github.com/distlock/distlock/sandbox"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/stdlib"
)

// TestPGTokenChecksHolder: PostgreSQL's fencing statement hands a token out
// only while the lock's transaction is in progress. Once it has ended (the
// holder's session died between the grant and the token), the increment
// still happens but the token is refused (errLostBeforeToken) and never
// handed out; the next holder's token is above it. The check relies on
// txid_status being volatile, evaluated on the row the increment returns
// (not folded to a constant before it), which is checked too.
func TestPGTokenChecksHolder(t *testing.T) {
	g := sandbox.StartT(t, sandbox.Spec{Kind: sandbox.Postgres, Logf: func(string, ...any) {}})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cfg, err := pgx.ParseConfig(g.URL())
	if err != nil {
		t.Fatal(err)
	}
	db := stdlib.OpenDB(*cfg)
	defer db.Close()
	d, err := newDriver(ctx, db, pgDialect{}, &Options{Table: "distlock_token_test"})
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()

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
	if err != nil || tok != 1 {
		t.Fatalf("token while the transaction is in progress: %d, %v; want 1", tok, err)
	}
	if _, err := pgExec(ctx, c, "ROLLBACK"); err != nil {
		t.Fatal(err)
	}
	if tok, err := (pgDialect{}).token(ctx, lc, "k", "o", lockResult{found: true, xid: xid}); !errors.Is(err, errLostBeforeToken) {
		t.Fatalf("token for an ended transaction: %d, %v; want errLostBeforeToken", tok, err)
	}
	xid = begin()
	tok, err = pgDialect{}.token(ctx, lc, "k", "o", lockResult{found: true, xid: xid})
	if err != nil || tok != 3 {
		t.Fatalf("the next token: %d, %v; want 3 (2 was burnt, never handed out)", tok, err)
	}
	_, _ = pgExec(ctx, c, "ROLLBACK")
}
