package sqllock_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"net"
	"sync/atomic"
	"testing"
	"time"

	"github.com/distlock/distlock"
	"github.com/distlock/distlock/backend"
	"github.com/distlock/distlock/sandbox"
	"github.com/distlock/distlock/sqllock"
	"github.com/go-sql-driver/mysql"
)

// seqBits mirrors the driver's token layout: epoch<<seqBits | seq.
const seqBits = 24

// epochOf reads key's durable fencing epoch (0 if it has none).
func epochOf(t *testing.T, s *server, table, key string) uint64 {
	t.Helper()
	var e uint64
	err := s.admin.QueryRowContext(ctxFor(t, 10*time.Second), "SELECT token FROM `"+table+sqllock.FenceSuffix+"` WHERE name = ?", key).Scan(&e)
	if err != nil && !errors.Is(err, sql.ErrNoRows) {
		t.Fatal(err)
	}
	return e
}

// liveRows counts key's rows in the live counter table.
func liveRows(t *testing.T, s *server, table, key string) int {
	t.Helper()
	var n int
	err := s.admin.QueryRowContext(ctxFor(t, 10*time.Second), "SELECT COUNT(*) FROM `"+table+sqllock.LiveSuffix+"` WHERE name = ?", key).Scan(&n)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// takeRelease acquires key (waiting) and releases it, returning the token.
func takeRelease(t *testing.T, l *distlock.Locker, key string) uint64 {
	t.Helper()
	le := mustAcquire(t, l, key)
	tok := le.Token()
	release(t, le)
	return tok
}

// TestTokensAcrossRestart: in steady state tokens come from the live
// counter (consecutive, the durable epoch untouched); a server restart
// empties the live counters, and the next grant starts a new durable epoch
// whose tokens are larger than every token before the restart.
func TestTokensAcrossRestart(t *testing.T) {
	allModes(t, func(t *testing.T, m mode) {
		s := startServer(t)
		l := newLockerMode(t, s, 5*time.Second, m)
		key := uniqueKey("restart")
		first := takeRelease(t, l, key)
		epoch := epochOf(t, s, testTable, key)
		if epoch == 0 || first != epoch<<seqBits|1 {
			t.Fatalf("first token %d, epoch %d: want the epoch's first token %d", first, epoch, epoch<<seqBits|1)
		}
		last := first
		for i := range 3 {
			tok := takeRelease(t, l, key)
			if tok != last+1 {
				t.Errorf("steady-state grant %d: token %d after %d, want the next in the epoch", i, tok, last)
			}
			last = tok
		}
		if e := epochOf(t, s, testTable, key); e != epoch {
			t.Errorf("durable epoch moved from %d to %d in steady state", epoch, e)
		}

		ctx := ctxFor(t, 3*time.Minute)
		if err := s.g.Node(0).Stop(ctx); err != nil {
			t.Fatal(err)
		}
		if err := s.g.Node(0).Start(ctx); err != nil {
			t.Fatal(err)
		}
		if n := liveRows(t, s, testTable, key); n != 0 {
			t.Fatalf("the restart left %d live counter rows", n)
		}
		d, _ := newDriverMode(t, s, sqllock.Options{}, m)
		info, err := d.Inspect(ctxFor(t, 10*time.Second), key, backend.Exclusive)
		if err != nil || info.Held || info.Token != 0 {
			t.Errorf("Inspect after the restart = %+v, %v; want free, token unknown (0)", info, err)
		}
		tok := takeRelease(t, l, key)
		if tok <= last {
			t.Fatalf("token %d after the restart, not above %d before it", tok, last)
		}
		if e := epochOf(t, s, testTable, key); e != epoch+1 || tok != e<<seqBits|1 {
			t.Errorf("after the restart: token %d, epoch %d; want the first token of epoch %d", tok, e, epoch+1)
		}
	})
}

// TestTokenEpochEnd: a live counter at the last token of its epoch is not
// moved into the next epoch's range; a new durable epoch starts instead.
func TestTokenEpochEnd(t *testing.T) {
	allModes(t, func(t *testing.T, m mode) {
		s := startServer(t)
		l := newLockerMode(t, s, 5*time.Second, m)
		key := uniqueKey("epochend")
		takeRelease(t, l, key)
		epoch := epochOf(t, s, testTable, key)
		_, err := s.admin.ExecContext(ctxFor(t, 10*time.Second),
			fmt.Sprintf("UPDATE `%s%s` SET token = token | %d WHERE name = ?", testTable, sqllock.LiveSuffix, 1<<seqBits-1), key)
		if err != nil {
			t.Fatal(err)
		}
		end := epoch<<seqBits | (1<<seqBits - 1)
		tok := takeRelease(t, l, key)
		if want := (epoch+1)<<seqBits | 1; tok != want {
			t.Errorf("after the epoch's last token %d: token %d, want %d (the next epoch's first)", end, tok, want)
		}
		if e := epochOf(t, s, testTable, key); e != epoch+1 {
			t.Errorf("durable epoch %d, want %d", e, epoch+1)
		}
	})
}

// TestLiveTableFull: when the MEMORY table of live counters is full, the
// least recently granted counters are forgotten; every key's tokens keep
// increasing, forgotten keys starting new durable epochs.
func TestLiveTableFull(t *testing.T) {
	s := startServer(t)
	const table = "distlock_test_small"
	ctx := ctxFor(t, time.Minute)
	c, err := s.admin.Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	ddl, err := sqllock.DDL(table)
	if err != nil {
		t.Fatal(err)
	}
	// The smallest MEMORY table the server allows: about a dozen rows.
	for _, q := range append([]string{"DROP TABLE IF EXISTS `" + table + sqllock.LiveSuffix + "`",
		"SET SESSION max_heap_table_size = 16384"}, ddl...) {
		if _, err := c.ExecContext(ctx, q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	_ = c.Raw(func(any) error { return errors.New("discard: session settings changed") })
	_ = c.Close()

	allModes(t, func(t *testing.T, m mode) {
		d, _ := newDriverMode(t, s, sqllock.Options{Table: table}, m)
		req := func(key string) backend.Request {
			return backend.Request{Key: key, Owner: "owner-full-0123456789abc", TTL: 5 * time.Second}
		}
		const keys = 40
		last := map[string]uint64{}
		names := make([]string, keys)
		for round := range 2 {
			for i := range names {
				if round == 0 {
					names[i] = uniqueKey(fmt.Sprintf("full%02d", i))
				}
				g, err := d.TryAcquire(ctxFor(t, 10*time.Second), req(names[i]))
				if err != nil {
					t.Fatalf("round %d key %d: %v", round, i, err)
				}
				if g.Token <= last[names[i]] {
					t.Errorf("round %d key %d: token %d after %d", round, i, g.Token, last[names[i]])
				}
				last[names[i]] = g.Token
				if err := g.Lock.Release(ctxFor(t, 10*time.Second)); err != nil {
					t.Fatal(err)
				}
			}
		}
		var rows int
		if err := s.admin.QueryRowContext(ctxFor(t, 10*time.Second), "SELECT COUNT(*) FROM `"+table+sqllock.LiveSuffix+"`").Scan(&rows); err != nil {
			t.Fatal(err)
		}
		if rows >= keys {
			t.Errorf("the live table holds %d rows for %d keys: it was not full, the test proves nothing", rows, keys)
		}
		t.Logf("live table: %d rows for %d keys", rows, keys)
	})
}

// TestBatchedRoundTrips: a Driver over a batching pool takes and frees an
// uncontended lock in two round trips (one request each way). A
// non-batching one takes three for TryAcquire (locking read, live
// counter, COMMIT: the spare connection of the last lock has the session
// settings already), and two for a blocking wait, whose locking read and
// live counter are one CALL of the procedure; without the procedure
// (NoProcedure, or an account that may not create it), three. Each request
// is one write on the socket.
func TestBatchedRoundTrips(t *testing.T) {
	s := startServer(t)
	for _, tc := range []struct {
		batch, noProc bool
		try, wait     int
	}{{false, false, 3, 2}, {false, true, 3, 3}, {true, false, 2, 2}} {
		c := &countingDialer{}
		cfg, err := mysql.ParseDSN(sandbox.MySQLDSN(s.addr()))
		if err != nil {
			t.Fatal(err)
		}
		cfg.InterpolateParams, cfg.MultiStatements = true, tc.batch
		cfg.DialFunc = c.dial
		conn, err := mysql.NewConnector(cfg)
		if err != nil {
			t.Fatal(err)
		}
		db := sql.OpenDB(conn)
		t.Cleanup(func() { _ = db.Close() })
		d, err := sqllock.New(ctxFor(t, 30*time.Second), db, &sqllock.Options{Table: testTable, NoProcedure: tc.noProc})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = d.Close() })
		key := uniqueKey("roundtrips")
		r := backend.Request{Key: key, Owner: "owner-rt-0123456789abcde", TTL: 5 * time.Second}
		cycle := func(wait bool) {
			var g backend.Grant
			var err error
			if wait {
				g, err = d.Wait(ctxFor(t, 10*time.Second), r)
			} else {
				g, err = d.TryAcquire(ctxFor(t, 10*time.Second), r)
			}
			if err != nil {
				t.Fatal(err)
			}
			if err := g.Lock.Release(ctxFor(t, 10*time.Second)); err != nil {
				t.Fatal(err)
			}
		}
		cycle(false) // creates the rows and learns what the pool can do
		cycle(true)  // learns the connection's id
		for _, wait := range []bool{false, true} {
			before := c.writes()
			cycle(wait)
			want := tc.try
			if wait {
				want = tc.wait
			}
			if got := c.writes() - before; got != want {
				t.Errorf("batch=%v noProc=%v wait=%v: %d requests for acquire+release, want %d", tc.batch, tc.noProc, wait, got, want)
			}
		}
	}
}

// countingDialer counts the writes on the connections it dials.
type countingDialer struct{ n atomic.Int64 }

func (c *countingDialer) dial(ctx context.Context, _, addr string) (net.Conn, error) {
	var d net.Dialer
	nc, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return nil, err
	}
	return &countingConn{Conn: nc, n: &c.n}, nil
}

func (c *countingDialer) writes() int { return int(c.n.Load()) }

type countingConn struct {
	net.Conn
	n *atomic.Int64
}

func (c *countingConn) Write(b []byte) (int, error) {
	c.n.Add(1)
	return c.Conn.Write(b)
}
