package sqllock_test

import (
	"database/sql"
	"testing"
	"time"

	"github.com/distlock/distlock/backend"
	"github.com/distlock/distlock/sqllock"
)

// TestServerSidePrepare: with a *sql.DB as users usually open it (no
// interpolateParams, under which a statement with arguments would be
// prepared on the server; the Driver's statements carry literals instead,
// see TestRoundTrips), every statement of the protocol works and tokens
// increase.
func TestServerSidePrepare(t *testing.T) {
	s := startServer(t)
	db, err := sql.Open("mysql", mysqlDSN(s.addr()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = db.Close() })
	d, err := sqllock.New(ctxFor(t, 30*time.Second), db, &sqllock.Options{Table: testTable, LockWaitTimeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = d.Close() })
	key := uniqueKey("prepared")
	req := backend.Request{Key: key, Owner: "owner-prep-0123456789abcd", TTL: 2 * time.Second}
	var last uint64
	for i, wait := range []bool{false, true, false, true} {
		var g backend.Grant
		if wait {
			g, err = d.Wait(ctxFor(t, 10*time.Second), req)
		} else {
			g, err = d.TryAcquire(ctxFor(t, 10*time.Second), req)
		}
		if err != nil {
			t.Fatalf("round %d (wait=%v): %v", i, wait, err)
		}
		if g.Token <= last {
			t.Errorf("round %d: token %d after %d", i, g.Token, last)
		}
		last = g.Token
		if err := g.Lock.Refresh(ctxFor(t, 10*time.Second), 3*time.Second); err != nil {
			t.Errorf("round %d: Refresh: %v", i, err)
		}
		info, err := d.Inspect(ctxFor(t, 10*time.Second), key, backend.Exclusive)
		if err != nil || !info.Held || info.Token != g.Token {
			t.Errorf("round %d: Inspect = %+v, %v", i, info, err)
		}
		if err := g.Lock.Release(ctxFor(t, 10*time.Second)); err != nil {
			t.Errorf("round %d: Release: %v", i, err)
		}
	}
	checkMySQLPool(t, &client{db: db})
}
