package sqlbench

import (
	"context"
	"database/sql"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/distlock/distlock/bench/internal/measure"
	"github.com/distlock/distlock/sqllock"
)

// breakdownOps is how many acquire+release cycles each count and timing
// below averages over.
const breakdownOps = 300

// TestBreakdown shows where an acquire+release goes (go test -v -run
// TestBreakdown): the server's durability settings and the time of each
// statement of the protocols and of a durable commit against a
// non-durable write (TestRoundTrips counts the statements, round trips and
// fsyncs). It asserts nothing about speed.
func TestBreakdown(t *testing.T) {
	if testing.Short() {
		t.Skip("short mode")
	}
	ctx := context.Background()
	db := openDefault(addr)
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

	// Statement times, on one pinned connection (and a second one for the
	// autocommit statements), averaged.
	lt, ft, vt := "`"+table+"`", "`"+table+sqllock.FenceSuffix+"`", "`"+table+sqllock.LiveSuffix+"`"
	live := "UPDATE " + vt + " SET token = LAST_INSERT_ID(token + 1), owner = ?, holder_id = CONNECTION_ID(), granted_at = NOW(6) " +
		"WHERE name = ? AND token & 16777215 < 16777215"
	reset := "SET SESSION autocommit = 1, wait_timeout = DEFAULT, innodb_lock_wait_timeout = DEFAULT"
	bdb := openDBWith(addr, true, nil)
	defer bdb.Close()
	d, err := sqllock.New(ctx, bdb, &sqllock.Options{Table: table}) // the tables
	if err != nil {
		t.Fatal(err)
	}
	_ = d.Close()
	req := struct{ Key string }{fmt.Sprintf("bench-breakdown-%d", time.Now().UnixNano())}
	if _, err := bdb.ExecContext(ctx, "INSERT IGNORE INTO "+lt+" (name) VALUES (?)", req.Key); err != nil {
		t.Fatal(err)
	}
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
