package sqllock_test

import (
	"context"
	"net"
	"os"
	"testing"
	"time"

	"github.com/distlock/distlock/backend"
	"github.com/distlock/distlock/sqllock"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/stdlib"
)

// TestPostgresCost measures, per uncontended acquire+release, what the
// server counts: commits and rollbacks (pg_stat_database), WAL records
// and WAL syncs (pg_stat_wal; the latter also counts the WAL writer's
// background flushes), beside the round trips on the wire, for the driver
// and for a bare BEGIN; SELECT ... FOR UPDATE; COMMIT and a session
// pg_advisory_lock/unlock through pgx in the same run. Measurement, not a
// check: it runs only with DISTLOCK_PG_COST=1 (docs/sql.md has its
// figures).
func TestPostgresCost(t *testing.T) {
	if os.Getenv("DISTLOCK_PG_COST") == "" {
		t.Skip("a measurement: set DISTLOCK_PG_COST=1")
	}
	s := startPG(t)
	const pairs = 200
	type counters struct{ commit, rollback, walRecords, walSync int64 }
	read := func() counters {
		t.Helper()
		var c counters
		ctx := ctxFor(t, 10*time.Second)
		_, _ = s.admin.ExecContext(ctx, "SELECT pg_stat_clear_snapshot()")
		if err := s.admin.QueryRowContext(ctx,
			"SELECT d.xact_commit, d.xact_rollback, w.wal_records, w.wal_sync FROM pg_stat_database d, pg_stat_wal w WHERE d.datname = current_database()").
			Scan(&c.commit, &c.rollback, &c.walRecords, &c.walSync); err != nil {
			t.Fatal(err)
		}
		return c
	}
	counted := func() (*pgx.ConnConfig, *wireCounter) {
		wc := newWireCounter()
		return s.pgConfig(s.addr, func(c net.Conn) net.Conn { return &pgCountConn{Conn: c, wc: wc} }), wc
	}
	// run measures pairs of pair(i) after warm-up; close ends the
	// contender's sessions, which makes their backends report their
	// statistics.
	run := func(name string, pair func(i int) error, close func()) {
		t.Helper()
		for i := range 5 {
			if err := pair(i); err != nil {
				t.Fatalf("%s: %v", name, err)
			}
		}
		time.Sleep(1500 * time.Millisecond)
		before := read()
		for i := range pairs {
			if err := pair(i); err != nil {
				t.Fatalf("%s: %v", name, err)
			}
		}
		close()
		time.Sleep(1500 * time.Millisecond)
		after := read()
		per := func(a, b int64) float64 { return float64(a-b) / pairs }
		t.Logf("%-45s commits %.2f rollbacks %.2f WAL records %.2f WAL syncs %.2f per pair",
			name, per(after.commit, before.commit), per(after.rollback, before.rollback),
			per(after.walRecords, before.walRecords), per(after.walSync, before.walSync))
	}
	roundTrips := func(name string, pc *wireCounter, f func()) {
		before := pc.snapshot()
		f()
		after := pc.snapshot()
		rt := (after['Q'] - before['Q']) + (after['S'] - before['S'])
		t.Logf("%-45s round trips (Query + Sync messages) %.2f per pair", name, float64(rt)/pairs)
	}

	for _, mode := range []struct {
		name     string
		advisory bool
		wait     bool
	}{{"distlock TryAcquire", false, false}, {"distlock Wait", false, true}, {"distlock advisory TryAcquire", true, false}} {
		cfg, pc := counted()
		db := stdlib.OpenDB(*cfg)
		d, err := sqllock.New(ctxFor(t, 30*time.Second), db, &sqllock.Options{Table: testTable, Advisory: mode.advisory})
		if err != nil {
			t.Fatal(err)
		}
		req := backend.Request{Key: uniqueKey("pg-cost"), Owner: "cost", TTL: 30 * time.Second}
		pair := func(int) error {
			ctx := ctxFor(t, 10*time.Second)
			acq := d.TryAcquire
			if mode.wait {
				acq = d.Wait
			}
			g, err := acq(ctx, req)
			if err != nil {
				return err
			}
			return g.Lock.Release(ctx)
		}
		roundTrips(mode.name, pc, func() {
			run(mode.name, pair, func() { _ = d.Close(); _ = db.Close() })
		})
	}

	// Peers, each through a pgx connection of its own as users write them.
	peer := func() (*pgx.Conn, *wireCounter) {
		cfg, pc := counted()
		conn, err := pgx.ConnectConfig(ctxFor(t, 10*time.Second), cfg)
		if err != nil {
			t.Fatal(err)
		}
		return conn, pc
	}
	conn, pc := peer()
	key := []byte(uniqueKey("pg-cost-bare"))
	if _, err := conn.Exec(ctxFor(t, 10*time.Second), `INSERT INTO "`+testTable+`" (name) VALUES ($1) ON CONFLICT DO NOTHING`, key); err != nil {
		t.Fatal(err)
	}
	roundTrips("bare BEGIN; FOR UPDATE; COMMIT (pgx)", pc, func() {
		run("bare BEGIN; FOR UPDATE; COMMIT (pgx)", func(int) error {
			ctx := ctxFor(t, 10*time.Second)
			tx, err := conn.Begin(ctx)
			if err != nil {
				return err
			}
			var one int
			if err := tx.QueryRow(ctx, `SELECT 1 FROM "`+testTable+`" WHERE name = $1 FOR UPDATE`, key).Scan(&one); err != nil {
				_ = tx.Rollback(ctx)
				return err
			}
			return tx.Commit(ctx)
		}, func() { _ = conn.Close(context.Background()) })
	})
	conn, pc = peer()
	roundTrips("session pg_advisory_lock/unlock (pgx)", pc, func() {
		run("session pg_advisory_lock/unlock (pgx)", func(int) error {
			ctx := ctxFor(t, 10*time.Second)
			if _, err := conn.Exec(ctx, "SELECT pg_advisory_lock($1)", int64(4242)); err != nil {
				return err
			}
			_, err := conn.Exec(ctx, "SELECT pg_advisory_unlock($1)", int64(4242))
			return err
		}, func() { _ = conn.Close(context.Background()) })
	})
}
