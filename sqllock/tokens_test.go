package sqllock_test

import (
	"database/sql"
	"errors"
	"fmt"
	"net"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/distlock/distlock"
	"github.com/distlock/distlock/backend"
	"github.com/distlock/distlock/sqllock"
)

// epochOf reads key's durable fencing epoch in table (0: none): the
// fence row's token column holds the epoch (MySQL), or epoch<<seqBits
// (PostgreSQL). It retries while the server comes back after a restart.
func epochOf(t *testing.T, d *dialect, s *server, key string) uint64 {
	t.Helper()
	var tok uint64
	q := d.sql("SELECT token FROM `" + d.table() + sqllock.FenceSuffix + "` WHERE name = ?")
	retry(t, func() error {
		err := s.admin.QueryRowContext(ctxFor(t, 10*time.Second), q, []byte(key)).Scan(&tok)
		if errors.Is(err, sql.ErrNoRows) {
			tok, err = 0, nil
		}
		return err
	})
	if !d.pg {
		return tok
	}
	if tok&(1<<d.seqBits-1) != 0 {
		t.Fatalf("the fence row of %q holds %d, not an epoch's base", key, tok)
	}
	return tok >> d.seqBits
}

// liveRows counts key's rows in the live counter table.
func liveRows(t *testing.T, d *dialect, s *server, key string) int {
	t.Helper()
	var n int
	q := d.sql("SELECT COUNT(*) FROM `" + d.table() + sqllock.LiveSuffix + "` WHERE name = ?")
	retry(t, func() error { return s.admin.QueryRowContext(ctxFor(t, 10*time.Second), q, []byte(key)).Scan(&n) })
	return n
}

// retry runs f until it succeeds, for at most a minute (the server may
// be coming back from a restart or a crash).
func retry(t *testing.T, f func() error) {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for {
		err := f()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatal(err)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// takeRelease acquires key (waiting) and releases it, returning the token.
func takeRelease(t *testing.T, l *distlock.Locker, key string) uint64 {
	t.Helper()
	le := mustAcquire(t, l, key)
	tok := le.Token()
	release(t, le)
	return tok
}

// steady takes a new key four times and checks the steady state: the
// first grant starts a durable epoch with its first token, the next come
// from the live counter (consecutive, the durable epoch untouched). It
// returns the epoch and the last token.
func steady(t *testing.T, d *dialect, s *server, l *distlock.Locker, key string) (epoch, last uint64) {
	t.Helper()
	first := takeRelease(t, l, key)
	epoch = epochOf(t, d, s, key)
	if epoch == 0 || first != epoch<<d.seqBits|1 {
		t.Fatalf("first token %d, epoch %d: want the epoch's first token %d", first, epoch, epoch<<d.seqBits|1)
	}
	last = first
	for i := range 3 {
		tok := takeRelease(t, l, key)
		if tok != last+1 {
			t.Errorf("steady-state grant %d: token %d after %d, want the next in the epoch", i, tok, last)
		}
		last = tok
	}
	if e := epochOf(t, d, s, key); e != epoch {
		t.Errorf("durable epoch moved from %d to %d in steady state", epoch, e)
	}
	return epoch, last
}

// newEpoch checks that the next grant of key is the first token of the
// epoch after epoch, above last, and the one after it the next.
func newEpoch(t *testing.T, d *dialect, s *server, l *distlock.Locker, key string, epoch, last uint64) {
	t.Helper()
	tok := takeRelease(t, l, key)
	if tok <= last {
		t.Fatalf("token %d, not above %d before", tok, last)
	}
	if e := epochOf(t, d, s, key); e != epoch+1 || tok != e<<d.seqBits|1 {
		t.Errorf("token %d, epoch %d; want the first token of epoch %d", tok, e, epoch+1)
	}
	if next := takeRelease(t, l, key); next != tok+1 {
		t.Errorf("token %d after %d, want the next in the new epoch", next, tok)
	}
}

// liveLost checks what follows the loss of the live counters (a MySQL
// restart, a PostgreSQL crash): no live row left, Inspect knows no token,
// and the next grant starts a new durable epoch.
func liveLost(t *testing.T, d *dialect, s *server, l *distlock.Locker, key string, epoch, last uint64) {
	t.Helper()
	if n := liveRows(t, d, s, key); n != 0 {
		t.Fatalf("the restart left %d live counter rows", n)
	}
	dr, _ := d.newDriver(t, s, sqllock.Options{})
	info, err := dr.Inspect(ctxFor(t, 10*time.Second), key, backend.Exclusive)
	if err != nil || info.Held || info.Token != 0 {
		t.Errorf("Inspect after the restart = %+v, %v; want free, token unknown (0)", info, err)
	}
	newEpoch(t, d, s, l, key, epoch, last)
}

// afterEvent runs, for each row of set, a new key's steady state
// (steady), then event (a restart, a crash, a change of the counters),
// then check, with the Locker, the key's epoch and its last token.
func afterEvent(t *testing.T, set rowSet, event func(t *testing.T, d *dialect, s *server, key string),
	check func(t *testing.T, d *dialect, s *server, l *distlock.Locker, key string, epoch, last uint64)) {
	eachDialect(t, set, func(t *testing.T, d *dialect) {
		s := d.server(t)
		l, _ := d.newLocker(t, s, 5*time.Second, sqllock.Options{})
		key := uniqueKey("tokens")
		epoch, last := steady(t, d, s, l, key)
		event(t, d, s, key)
		check(t, d, s, l, key, epoch, last)
	})
}

// TestTokensAcrossRestart: in steady state tokens come from the live
// counter (consecutive, the durable epoch untouched). A clean restart
// empties MySQL's MEMORY table of live counters: the next grant starts a
// new durable epoch whose tokens are larger than every token before the
// restart. PostgreSQL writes its UNLOGGED table out at a clean shutdown,
// so the live counters survive and tokens go on in the same epoch (no
// durable write).
func TestTokensAcrossRestart(t *testing.T) {
	afterEvent(t, allRows|sessionRows, func(t *testing.T, _ *dialect, s *server, _ string) {
		if err := s.restart(ctxFor(t, 3*time.Minute)); err != nil {
			t.Fatal(err)
		}
	}, func(t *testing.T, d *dialect, s *server, l *distlock.Locker, key string, epoch, last uint64) {
		if !d.restartKeepsLive {
			liveLost(t, d, s, l, key, epoch, last)
			return
		}
		tok := takeRelease(t, l, key)
		if tok <= last {
			t.Fatalf("token %d after the clean restart, not above %d before it", tok, last)
		}
		if e := epochOf(t, d, s, key); tok != last+1 || e != epoch {
			t.Errorf("after a clean restart: token %d, epoch %d; want %d in epoch %d (the live counter kept)", tok, e, last+1, epoch)
		}
	})
}

// TestTokensAcrossCrash: a crash of the server (SIGKILL of every process)
// makes PostgreSQL's crash recovery empty the UNLOGGED live counters; the
// next grant starts a new durable epoch, above every token before the
// crash.
func TestTokensAcrossCrash(t *testing.T) {
	afterEvent(t, pgRow|pgSession, func(t *testing.T, _ *dialect, s *server, _ string) {
		if err := s.crash(ctxFor(t, 3*time.Minute)); err != nil {
			t.Fatal(err)
		}
	}, liveLost)
}

// TestTokensAcrossBackendCrash: SIGKILL of one PostgreSQL backend makes
// the postmaster restart every backend through crash recovery, which
// empties the live counters as a whole-server crash does. Local provider
// only (the backend's pid is a host pid there).
func TestTokensAcrossBackendCrash(t *testing.T) {
	afterEvent(t, pgRow, func(t *testing.T, _ *dialect, s *server, _ string) {
		if !s.local() {
			t.Skipf("signals a backend by its pid: local provider only (this is %q)", s.provider())
		}
		c, err := s.admin.Conn(ctxFor(t, 10*time.Second))
		if err != nil {
			t.Fatal(err)
		}
		var pid int
		if err := c.QueryRowContext(ctxFor(t, 10*time.Second), "SELECT pg_backend_pid()").Scan(&pid); err != nil {
			t.Fatal(err)
		}
		if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
			t.Fatal(err)
		}
		_ = c.Close()
	}, func(t *testing.T, d *dialect, s *server, l *distlock.Locker, key string, epoch, last uint64) {
		if n := liveRows(t, d, s, key); n != 0 {
			t.Fatalf("crash recovery left %d live counter rows", n)
		}
		newEpoch(t, d, s, l, key, epoch, last)
	})
}

// TestTokenMissingCounter: a key whose live counter row is gone (deleted
// here, as crash recovery would) starts a new durable epoch.
func TestTokenMissingCounter(t *testing.T) {
	afterEvent(t, mysqlProc|pgRow|pgAdvisory|sessionRows, func(t *testing.T, d *dialect, s *server, key string) {
		retry(t, func() error {
			_, err := s.admin.ExecContext(ctxFor(t, 10*time.Second),
				d.sql("DELETE FROM `"+d.table()+sqllock.LiveSuffix+"` WHERE name = ?"), []byte(key))
			return err
		})
	}, newEpoch)
}

// TestTokenEpochEnd: a live counter at the last token of its epoch is not
// moved into the next epoch's range; a new durable epoch starts instead.
func TestTokenEpochEnd(t *testing.T) {
	afterEvent(t, allMySQL|pgRow|sessionRows, func(t *testing.T, d *dialect, s *server, key string) {
		retry(t, func() error {
			_, err := s.admin.ExecContext(ctxFor(t, 10*time.Second),
				d.sql(fmt.Sprintf("UPDATE `%s%s` SET token = token | %d WHERE name = ?", d.table(), sqllock.LiveSuffix, uint64(1)<<d.seqBits-1)), []byte(key))
			return err
		})
	}, func(t *testing.T, d *dialect, s *server, l *distlock.Locker, key string, epoch, _ uint64) {
		newEpoch(t, d, s, l, key, epoch, epoch<<d.seqBits|(1<<d.seqBits-1))
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
		db := sql.OpenDB(s.mysqlConnector(s.addr, tc.batch, c.wrap))
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

func (c *countingDialer) wrap(nc net.Conn) net.Conn { return &countingConn{Conn: nc, n: &c.n} }

func (c *countingDialer) writes() int { return int(c.n.Load()) }

type countingConn struct {
	net.Conn
	n *atomic.Int64
}

func (c *countingConn) Write(b []byte) (int, error) {
	c.n.Add(1)
	return c.Conn.Write(b)
}
