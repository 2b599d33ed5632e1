package sqlbench

import (
	"context"
	"database/sql"
	"fmt"
	"os"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/distlock/distlock/backend"
	"github.com/distlock/distlock/internal/measure"
	"github.com/distlock/distlock/sqllock"
)

// breakdownOps is how many acquire+release cycles each count and timing
// below averages over.
const breakdownOps = 300

// TestBreakdown shows where an acquire+release goes (go test -v -run
// TestBreakdown): the server's durability settings, how many statements,
// commits and redo-log fsyncs one cycle of the sqllock driver and of the
// bare FOR UPDATE costs (from the server's global status counters; the
// benchmark is the server's only client), and the time of each statement
// of both protocols and of a durable commit against a non-durable write.
// It asserts nothing about speed.
func TestBreakdown(t *testing.T) {
	if testing.Short() {
		t.Skip("short mode")
	}
	ctx := context.Background()
	db := openDB()
	defer db.Close()
	var out strings.Builder
	p := func(format string, args ...any) { fmt.Fprintf(&out, format, args...) }

	p("server settings:\n")
	for _, v := range []string{"version", "innodb_flush_log_at_trx_commit", "sync_binlog", "log_bin",
		"innodb_flush_method", "tx_isolation"} {
		var val string
		if err := db.QueryRowContext(ctx, "SELECT @@global."+v).Scan(&val); err != nil {
			val = "(" + err.Error() + ")"
		}
		p("  %-32s %s\n", v, val)
	}

	// Counts per cycle, from global status deltas.
	p("\nper acquire+release (%d cycles; requests = writes on the client's sockets; the rest from global status deltas, the SHOW itself subtracted):\n", breakdownOps)
	p("  %-32s %9s %9s %9s %11s %9s\n", "", "requests", "questions", "commits", "redo writes", "fsyncs")
	key := fmt.Sprintf("bench-breakdown-%d", time.Now().UnixNano())
	req := backend.Request{Key: key, Owner: "breakdown", TTL: 30 * time.Second}
	type cycle struct {
		name string
		run  func() error
	}
	var cycles []cycle
	var closers []func()
	defer func() {
		for _, f := range slices.Backward(closers) { // drivers before their pools
			f()
		}
	}()
	counters := map[string]*atomic.Int64{}
	for _, batch := range []bool{true, false} {
		mode := map[bool]string{true: "batched", false: "unbatched"}[batch]
		n := new(atomic.Int64)
		pool := openDBWith(batch, countingDial(n))
		closers = append(closers, func() { _ = pool.Close() })
		d, err := sqllock.New(ctx, pool, &sqllock.Options{Table: table})
		if err != nil {
			t.Fatal(err)
		}
		closers = append(closers, func() { _ = d.Close() })
		for _, wait := range []bool{false, true} {
			name := "sqllock TryAcquire, " + mode
			if wait {
				name = "sqllock Wait, " + mode
			}
			counters[name] = n
			cycles = append(cycles, cycle{name, func() error {
				var g backend.Grant
				var err error
				if wait {
					g, err = d.Wait(ctx, req)
				} else {
					g, err = d.TryAcquire(ctx, req)
				}
				if err != nil {
					return err
				}
				return g.Lock.Release(ctx)
			}})
		}
	}
	n := new(atomic.Int64)
	fu := &forUpdateClient{db: openDBWith(false, countingDial(n)), rows: map[string]bool{}}
	closers = append(closers, fu.Close)
	counters["bare FOR UPDATE"] = n
	cycles = append(cycles, cycle{"bare FOR UPDATE", func() error {
		unlock, err := fu.Acquire(ctx, req.Key)
		if err != nil {
			return err
		}
		return unlock(ctx)
	}})
	for _, c := range cycles {
		if err := c.run(); err != nil { // warm-up: rows exist, pools filled, ids known
			t.Fatalf("%s: %v", c.name, err)
		}
		if err := c.run(); err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		before, w0 := status(t, db), counters[c.name].Load()
		for range breakdownOps {
			if err := c.run(); err != nil {
				t.Fatalf("%s: %v", c.name, err)
			}
		}
		w1, after := counters[c.name].Load(), status(t, db)
		per := func(v string, self float64) float64 {
			return (float64(after[v]-before[v]) - self) / breakdownOps
		}
		p("  %-32s %9.2f %9.2f %9.2f %11.2f %9.2f\n", c.name, float64(w1-w0)/breakdownOps, per("Questions", 1),
			per("Handler_commit", 0), per("Innodb_log_writes", 0), per("Innodb_data_fsyncs", 0))
	}

	// Statement times, on one pinned connection (and a second one for the
	// autocommit statements), averaged.
	lt, ft, vt := "`"+table+"`", "`"+table+sqllock.FenceSuffix+"`", "`"+table+sqllock.LiveSuffix+"`"
	live := "UPDATE " + vt + " SET token = LAST_INSERT_ID(token + 1), owner = ?, holder_id = CONNECTION_ID(), granted_at = NOW(6) " +
		"WHERE name = ? AND token & 16777215 < 16777215"
	reset := "SET SESSION autocommit = 1, wait_timeout = DEFAULT, innodb_lock_wait_timeout = DEFAULT"
	bdb := openDBWith(true, nil)
	defer bdb.Close()
	c, err := bdb.Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	other, err := bdb.Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	// A spare connection, as the driver keeps one between locks: autocommit
	// off, the lock's idle timeout, no transaction open.
	spare, err := bdb.Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer spare.Close()
	if _, err := spare.ExecContext(ctx, "SET SESSION autocommit = 0, wait_timeout = 30"); err != nil {
		t.Fatal(err)
	}
	type step struct {
		name string
		on   *sql.Conn
		q    string
		args []any
	}
	fence := "INSERT INTO " + ft + " (name, token, owner, holder_id, granted_at) VALUES (?, LAST_INSERT_ID(1), ?, ?, NOW(6)) " +
		"ON DUPLICATE KEY UPDATE token = LAST_INSERT_ID(token + 1), owner = ?, holder_id = ?, granted_at = NOW(6)"
	protocols := []struct {
		name  string
		steps []step
	}{
		{"sqllock batched on a spare connection (a URL-opened Driver, steady state)", []step{
			{"SELECT INTO FOR UPDATE; UPDATE live", spare, "SELECT 1 INTO @distlock_found FROM " + lt +
				" WHERE name = ? FOR UPDATE NOWAIT; " + live, []any{req.Key, "o", req.Key}},
			{"COMMIT", spare, "COMMIT", nil},
		}},
		{"sqllock batched on a connection from the pool (no spare)", []step{
			{"SET; SELECT INTO FOR UPDATE; UPDATE live", c, "SET SESSION autocommit = 0, wait_timeout = ?; SELECT 1 INTO @distlock_found FROM " + lt +
				" WHERE name = ? FOR UPDATE NOWAIT; " + live, []any{30, req.Key, "o", req.Key}},
			{"SET autocommit=1, defaults", c, reset, nil},
		}},
		{"sqllock unbatched on a connection from the pool (New over a pool without multiStatements, no spare)", []step{
			{"SET autocommit=0, wait_timeout", c, "SET SESSION autocommit = 0, wait_timeout = ?", []any{30}},
			{"SELECT ... FOR UPDATE NOWAIT", c, "SELECT CONNECTION_ID() FROM " + lt + " WHERE name = ? FOR UPDATE NOWAIT", []any{req.Key}},
			{"UPDATE live counter (MEMORY)", c, live, []any{"o", req.Key}},
			{"SET autocommit=1, defaults", c, reset, nil},
		}},
		{"sqllock before (durable counter per grant)", []step{
			{"SET autocommit=0, wait_timeout", c, "SET SESSION autocommit = 0, wait_timeout = ?", []any{30}},
			{"SELECT ... FOR UPDATE NOWAIT", c, "SELECT CONNECTION_ID() FROM " + lt + " WHERE name = ? FOR UPDATE NOWAIT", []any{req.Key}},
			{"fence counter, autocommit", other, fence, []any{req.Key, "o", 1, "o", 1}},
			{"SET autocommit=1, defaults", c, reset, nil},
		}},
		{"bare FOR UPDATE", []step{
			{"START TRANSACTION", c, "START TRANSACTION", nil},
			{"SELECT ... FOR UPDATE", c, "SELECT name FROM " + lt + " WHERE name = ? FOR UPDATE", []any{req.Key}},
			{"COMMIT", c, "COMMIT", nil},
		}},
		{"durable vs non-durable write", []step{
			{"SELECT 1", c, "SELECT 1", nil},
			{"fence counter, autocommit", other, fence, []any{req.Key, "o", 1, "o", 1}},
			{"START TRANSACTION", c, "START TRANSACTION", nil},
			{"  fence counter in trx", c, fence, []any{req.Key, "o", 1, "o", 1}},
			{"  ROLLBACK (not durable)", c, "ROLLBACK", nil},
			{"live counter (MEMORY), autocommit", other, live, []any{"o", req.Key}},
		}},
	}
	for _, pr := range protocols {
		p("\n%s, per statement (median of %d):\n", pr.name, breakdownOps)
		times := make([][]time.Duration, len(pr.steps))
		for range breakdownOps {
			for i, s := range pr.steps {
				start := time.Now()
				if _, err := s.on.ExecContext(ctx, s.q, s.args...); err != nil {
					t.Fatalf("%s: %s: %v", pr.name, s.name, err)
				}
				times[i] = append(times[i], time.Since(start))
			}
		}
		var total time.Duration
		for i, s := range pr.steps {
			med := measure.Median(times[i])
			total += med
			p("  %-34s %10v\n", s.name, med)
		}
		p("  %-34s %10v\n", "sum of medians", total)
	}
	fmt.Fprint(os.Stdout, out.String())
}

// status reads the server's global status counters the breakdown uses.
func status(t *testing.T, db *sql.DB) map[string]int64 {
	t.Helper()
	rows, err := db.Query("SHOW GLOBAL STATUS WHERE Variable_name IN ('Questions', 'Handler_commit', 'Innodb_log_writes', 'Innodb_data_fsyncs')")
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	m := map[string]int64{}
	for rows.Next() {
		var k string
		var v int64
		if err := rows.Scan(&k, &v); err != nil {
			t.Fatal(err)
		}
		m[k] = v
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return m
}
