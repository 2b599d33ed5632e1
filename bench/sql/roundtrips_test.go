package sqlbench

import (
	"context"
	"database/sql"
	"fmt"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/distlock/distlock/bench/internal/lockbench"
	"github.com/distlock/distlock/bench/internal/measure"
)

// roundTripOps is how many uncontended acquire+release pairs each count
// below is averaged over.
const roundTripOps = 200

// statusVars are the server's global status counters TestRoundTrips
// reports per pair (a name the server lacks shows as 0).
var statusVars = []string{"Questions", "Com_stmt_prepare", "Com_stmt_execute", "Com_commit", "Handler_commit",
	"Innodb_log_writes", "Innodb_os_log_fsyncs", "Innodb_data_fsyncs"}

// TestRoundTrips counts, per uncontended acquire+release, what each
// contender sends and what the server does for it (go test -v -run
// TestRoundTrips): the commands on the wire (counted in a proxy between
// the contender and the server: QUERY, PREPARE, EXECUTE, CLOSE, PING...),
// the round trips among them (every command but CLOSE, which has no
// reply), and the server's status counters (statements, commits, redo
// writes and fsyncs; the benchmark is the server's only client, and the
// SHOW STATUS that reads them is subtracted). Counts are deterministic: it
// asserts nothing, it prints a table.
func TestRoundTrips(t *testing.T) {
	if testing.Short() {
		t.Skip("short mode")
	}
	ctx := context.Background()
	admin := openDefault(addr)
	defer admin.Close()
	admin.SetMaxIdleConns(1)

	proxy, err := startCountingProxy(addr)
	if err != nil {
		t.Fatal(err)
	}
	defer proxy.close()

	var out strings.Builder
	p := func(format string, args ...any) { fmt.Fprintf(&out, format, args...) }
	p("per uncontended acquire+release (mean of %d; Acquire, i.e. a blocking wait, for every contender):\n", roundTripOps)
	p("  %-20s %6s  %-52s", "", "trips", "commands on the wire")
	for _, v := range statusVars {
		p(" %s", v)
	}
	p("\n")
	for _, lib := range contendersAt(proxy.addr) {
		x, err := lib.Make()
		if err != nil {
			t.Fatalf("%s: %v", lib.Name, err)
		}
		key := lockbench.UniqueKey("roundtrips")
		if _, err := measure.Pairs(ctx, x, key, 2, 0); err != nil { // warm-up: rows, pools, ids
			x.Close()
			t.Fatalf("%s: %v", lib.Name, err)
		}
		w0, s0 := proxy.w.snapshot(), globalStatus(t, admin)
		if _, err := measure.Pairs(ctx, x, key, roundTripOps, time.Minute); err != nil {
			x.Close()
			t.Fatalf("%s: %v", lib.Name, err)
		}
		s1, w1 := globalStatus(t, admin), proxy.w.snapshot()
		x.Close()
		var d [256]int64
		for i := range d {
			d[i] = w1[i] - w0[i]
		}
		var cmds []string
		for c, v := range d {
			if v != 0 {
				cmds = append(cmds, fmt.Sprintf("%s %.2f", commandName(byte(c)), float64(v)/roundTripOps))
			}
		}
		slices.Sort(cmds)
		p("  %-20s %6.2f  %-52s", lib.Name, float64(roundTrips(d))/roundTripOps, strings.Join(cmds, ", "))
		for _, v := range statusVars {
			self := 0.0
			if v == "Questions" {
				self = 1 // the SHOW GLOBAL STATUS that read s1
			}
			p(" %*.2f", len(v), (float64(s1[v]-s0[v])-self)/roundTripOps)
		}
		p("\n")
	}
	fmt.Fprint(os.Stdout, out.String())
}

func commandName(c byte) string {
	if n, ok := commandNames[c]; ok {
		return n
	}
	return fmt.Sprintf("0x%02x", c)
}

// globalStatus reads the server's global status counters of statusVars.
func globalStatus(t *testing.T, db *sql.DB) map[string]int64 {
	t.Helper()
	rows, err := db.Query("SHOW GLOBAL STATUS WHERE Variable_name IN ('" + strings.Join(statusVars, "', '") + "')")
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
