package sqllock_test

import (
	"context"
	"net"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/stdlib"

	"github.com/distlock/distlock/backend"
	"github.com/distlock/distlock/sandbox"
	"github.com/distlock/distlock/sqllock"
)

// semPairs runs pairs uncontended TryAcquirePermits+Release of n permits
// of a semaphore of limit permits after a warm-up (slot creation, first
// epoch, spare; with pre > 0 first one grant of pre permits of a
// semaphore of pre, which leaves pre slots), and returns how many of each command were sent per pair,
// by snapshot (a counter of commands by kind).
func semPairs(t *testing.T, d *sqllock.Driver, pre, limit, n int, snapshot func() map[byte]int, kinds ...byte) map[byte]float64 {
	t.Helper()
	const pairs = 20
	key := uniqueKey("sem-roundtrips")
	grant := func(i, limit, n int) {
		ctx := ctxFor(t, 10*time.Second)
		g, err := d.TryAcquire(ctx, backend.Request{
			Kind: backend.Permits, Key: key, Owner: "sem-owner", TTL: 30 * time.Second,
			Limit: limit, Permits: n,
		})
		if err != nil {
			t.Fatalf("pair %d: %v", i, err)
		}
		if err := g.Lock.Release(ctx); err != nil {
			t.Fatalf("pair %d: release: %v", i, err)
		}
	}
	pair := func(i int) { grant(i, limit, n) }
	if pre > 0 {
		grant(-1, pre, pre)
	}
	for i := range 4 {
		pair(i)
	}
	before := snapshot()
	for i := range pairs {
		pair(i)
	}
	after := snapshot()
	out := map[byte]float64{}
	for _, k := range kinds {
		out[k] = float64(after[k]-before[k]) / pairs
	}
	return out
}

// TestSemaphoreRoundTrips: per uncontended TryAcquirePermits+Release in
// steady state, the commands sent, counted on the wire. MySQL over a
// *sql.DB with go-sql-driver's defaults: four (the locking read of free
// slots, the count of slot rows, the live counter's increment, COMMIT);
// with multiStatements two (the first three are one batch). Taking 3
// permits costs the same as 1. When the semaphore has more slots than the
// asker's limit (someone used a larger one), counting the held slots on
// another connection adds four (BEGIN, the locking read, the count,
// ROLLBACK).
func TestSemaphoreRoundTrips(t *testing.T) {
	s := startServer(t)
	for _, tc := range []struct {
		name   string
		params string
		want   float64
	}{
		{"default pool", "", 4},
		{"multiStatements", "&multiStatements=true", 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			db, cc := openCounted(t, s, tc.params)
			d, err := sqllock.New(ctxFor(t, 30*time.Second), db, &sqllock.Options{Table: testTable})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = d.Close() })
			for _, n := range []int{1, 3} {
				got := semPairs(t, d, 0, 4, n, cc.snapshot, comQuery, comPing, comStmtPrepare, comStmtExecute)
				if got[comQuery] != tc.want || got[comPing]+got[comStmtPrepare]+got[comStmtExecute] != 0 {
					t.Errorf("%d permits: commands per pair %v, want %v queries and nothing else", n, got, tc.want)
				}
			}
			got := semPairs(t, d, 6, 4, 1, cc.snapshot, comQuery, comPing, comStmtPrepare, comStmtExecute)
			if got[comQuery] != tc.want+4 || got[comPing]+got[comStmtPrepare]+got[comStmtExecute] != 0 {
				t.Errorf("6 slots, limit 4: commands per pair %v, want %v queries and nothing else", got, tc.want+4)
			}
		})
	}
}

// TestPostgresSemaphoreRoundTrips: PostgreSQL sends three round trips per
// uncontended TryAcquirePermits+Release: the batch that opens the
// transaction, locks the free slots and counts the slot rows; the
// committed fencing increment (on another connection, checking that the
// holding transaction is in progress); ROLLBACK. Counting the held slots
// (more slots than the asker's limit) adds one.
func TestPostgresSemaphoreRoundTrips(t *testing.T) {
	s := startPG(t)
	cfg, err := pgx.ParseConfig(sandbox.PostgresURL(s.addr()))
	if err != nil {
		t.Fatal(err)
	}
	pc := &pgCounter{n: map[byte]int{}}
	cfg.DialFunc = func(ctx context.Context, network, addr string) (net.Conn, error) {
		var d net.Dialer
		c, err := d.DialContext(ctx, network, addr)
		if err != nil {
			return nil, err
		}
		return &pgCountConn{Conn: c, pc: pc}, nil
	}
	db := stdlib.OpenDB(*cfg)
	t.Cleanup(func() { _ = db.Close() })
	d, err := sqllock.New(ctxFor(t, 30*time.Second), db, &sqllock.Options{Table: testTable})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = d.Close() })
	for _, n := range []int{1, 3} {
		got := semPairs(t, d, 0, 4, n, pc.snapshot, 'Q', 'S')
		if rt := got['Q'] + got['S']; rt != 3 {
			t.Errorf("%d permits: %v round trips per pair (Query %v, Sync %v), want 3", n, rt, got['Q'], got['S'])
		}
	}
	got := semPairs(t, d, 6, 4, 1, pc.snapshot, 'Q', 'S')
	if rt := got['Q'] + got['S']; rt != 4 {
		t.Errorf("6 slots, limit 4: %v round trips per pair (Query %v, Sync %v), want 4", rt, got['Q'], got['S'])
	}
}
