package sqllock_test

import (
	"context"
	"database/sql"
	"encoding/binary"
	"fmt"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"
	"github.com/jackc/pgx/v5/stdlib"

	"github.com/distlock/distlock"
	"github.com/distlock/distlock/backend"
	"github.com/distlock/distlock/sqllock"
)

// MySQL commands a client sends (the first payload byte of a packet with
// sequence number 0).
const (
	comQuery       = 0x03
	comPing        = 0x0e
	comStmtPrepare = 0x16
	comStmtExecute = 0x17
	comStmtClose   = 0x19
)

// wireCounter counts what clients send on connections dialled through it,
// by kind: a MySQL command by its command byte, a PostgreSQL message by
// its type byte.
type wireCounter struct {
	mu sync.Mutex
	n  map[byte]int
}

func newWireCounter() *wireCounter { return &wireCounter{n: map[byte]int{}} }

func (wc *wireCounter) add(kind byte) {
	wc.mu.Lock()
	wc.n[kind]++
	wc.mu.Unlock()
}

func (wc *wireCounter) snapshot() map[byte]int {
	wc.mu.Lock()
	defer wc.mu.Unlock()
	out := map[byte]int{}
	for k, v := range wc.n {
		out[k] = v
	}
	return out
}

// wireKinds are the kinds of what a client sends that the round-trip
// tests count; the first is the prepare (Parse) that no statement of the
// Driver needs.
func (d *dialect) wireKinds() []byte {
	if d.pg {
		return []byte{'P', 'Q', 'B', 'E', 'S'}
	}
	return []byte{comStmtPrepare, comQuery, comPing, comStmtExecute, comStmtClose}
}

// countConn follows the MySQL client→server stream packet by packet
// (3-byte length, sequence number, payload) and counts each packet with
// sequence number 0, a command, by its first payload byte.
type countConn struct {
	net.Conn
	wc     *wireCounter
	hdr    [4]byte
	nhdr   int
	remain int
	first  bool
}

func (c *countConn) Write(b []byte) (int, error) {
	for p := b; len(p) > 0; {
		if c.remain == 0 && c.nhdr < 4 {
			k := copy(c.hdr[c.nhdr:], p)
			c.nhdr += k
			p = p[k:]
			if c.nhdr == 4 {
				c.remain = int(c.hdr[0]) | int(c.hdr[1])<<8 | int(c.hdr[2])<<16
				c.first = c.hdr[3] == 0
				if c.remain == 0 {
					c.nhdr = 0
				}
			}
			continue
		}
		if c.first {
			c.wc.add(p[0])
			c.first = false
		}
		k := min(c.remain, len(p))
		c.remain -= k
		p = p[k:]
		if c.remain == 0 {
			c.nhdr = 0
		}
	}
	return c.Conn.Write(b)
}

// pgCountConn follows the PostgreSQL client→server stream message by
// message: the start-up message (a 4-byte length, no type), then a type
// byte and a 4-byte length that counts itself.
type pgCountConn struct {
	net.Conn
	wc      *wireCounter
	started bool
	hdr     [5]byte
	nhdr    int
	remain  int
}

func (c *pgCountConn) Write(b []byte) (int, error) {
	for p := b; len(p) > 0; {
		if c.remain > 0 {
			k := min(c.remain, len(p))
			c.remain -= k
			p = p[k:]
			continue
		}
		want := 5
		if !c.started {
			want = 4
		}
		k := copy(c.hdr[c.nhdr:want], p)
		c.nhdr += k
		p = p[k:]
		if c.nhdr < want {
			continue
		}
		if !c.started {
			c.started = true
			c.remain = int(binary.BigEndian.Uint32(c.hdr[:4])) - 4
		} else {
			c.wc.add(c.hdr[0])
			c.remain = int(binary.BigEndian.Uint32(c.hdr[1:5])) - 4
		}
		c.nhdr = 0
	}
	return c.Conn.Write(b)
}

var countingNets atomic.Int64

// openCounted opens a *sql.DB on s the way users do, through a dialer that
// counts what is sent. MySQL: sql.Open with a DSN and go-sql-driver's
// defaults (no interpolateParams, no multiStatements; params, e.g.
// "&multiStatements=true", are appended to the DSN). PostgreSQL: pgx's
// stdlib over pgx's defaults (params unused).
func openCounted(t *testing.T, s *server, params string) (*sql.DB, *wireCounter) {
	t.Helper()
	wc := newWireCounter()
	if s.pg {
		cfg := s.pgConfig(s.addr, func(c net.Conn) net.Conn { return &pgCountConn{Conn: c, wc: wc} })
		db := stdlib.OpenDB(*cfg)
		t.Cleanup(func() { _ = db.Close() })
		return db, wc
	}
	name := fmt.Sprintf("sqllock-count-%d", countingNets.Add(1))
	mysql.RegisterDialContext(name, func(ctx context.Context, addr string) (net.Conn, error) {
		var d net.Dialer
		c, err := d.DialContext(ctx, "tcp", addr)
		if err != nil {
			return nil, err
		}
		return &countConn{Conn: c, wc: wc}, nil
	})
	db, err := sql.Open("mysql", fmt.Sprintf("root:%s@%s(%s)/%s?parseTime=true%s",
		rootPassword, name, s.addr(), dbName, params))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = db.Close() })
	return db, wc
}

// countedDriver is a Driver of the row over openCounted's *sql.DB (MySQL
// batching in the row's batched mode), closed when the test ends.
func (d *dialect) countedDriver(t *testing.T, s *server, params string) (*sqllock.Driver, *wireCounter) {
	t.Helper()
	if d.m.batch {
		params = "&multiStatements=true" + params
	}
	db, wc := openCounted(t, s, params)
	opts := d.options(sqllock.Options{})
	dr, err := sqllock.New(ctxFor(t, 30*time.Second), db, &opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = dr.Close() })
	return dr, wc
}

// perPair returns how many of each kind were sent per pair between two
// snapshots.
func perPair(before, after map[byte]int, pairs int, kinds []byte) map[byte]float64 {
	out := map[byte]float64{}
	for _, k := range kinds {
		out[k] = float64(after[k]-before[k]) / float64(pairs)
	}
	return out
}

// steadyPairs runs pair 4 times (the warm-up: rows, epochs, spares,
// cached statements), then 20 times, and returns what wc counted per pair
// of those 20, by kind.
func steadyPairs(wc *wireCounter, kinds []byte, pair func(i int)) map[byte]float64 {
	const pairs = 20
	for i := range 4 {
		pair(i)
	}
	before := wc.snapshot()
	for i := range pairs {
		pair(i)
	}
	return perPair(before, wc.snapshot(), pairs, kinds)
}

// sameCounts reports whether got has want's count of every kind (a kind
// missing in want: none).
func sameCounts(got, want map[byte]float64, kinds []byte) bool {
	for _, k := range kinds {
		if got[k] != want[k] {
			return false
		}
	}
	return true
}

// TestRoundTrips: per uncontended acquire+release in steady state, what a
// Driver sends, counted on the wire. MySQL over a *sql.DB with
// go-sql-driver's defaults: three plain queries for TryAcquire (the
// locking read, the live counter's increment, COMMIT), two for a blocking
// wait (the CALL of the procedure doing both, COMMIT; three with
// NoProcedure), nothing prepared (a prepared statement costs PREPARE,
// EXECUTE and CLOSE: the bare BEGIN; SELECT ... FOR UPDATE; COMMIT over
// the same pool sends four round trips). With multiStatements, two: the
// read and the increment go as one batch. PostgreSQL: three round trips,
// two simple queries (BEGIN, the session's idle timeout and the locking
// read as one batch; ROLLBACK) and the fencing counter's increment on
// another connection as Bind, Execute, Sync of a statement pgx prepared
// once per connection (no Parse after the first use). In every row, no
// statement is prepared per key, neither on a key's first use nor by
// Inspect (pgx would prepare and cache a statement per key for
// database/sql's QueryRow).
func TestRoundTrips(t *testing.T) {
	type rtCase struct {
		name   string
		params string       // appended to the row's DSN (MySQL)
		locker bool         // through a Locker, else the Driver's own calls
		want   map[byte]int // per pair
		wait   map[byte]int // per pair with a blocking wait, if not want
	}
	cases := map[rowSet][]rtCase{
		// A blocking wait CALLs the procedure: lock and token in one.
		mysqlProc: {
			{"default pool", "", false, map[byte]int{comQuery: 3}, map[byte]int{comQuery: 2}},
			{"default pool, Locker", "", true, map[byte]int{comQuery: 3}, map[byte]int{comQuery: 2}},
		},
		mysqlStatements: {{"default pool", "", false, map[byte]int{comQuery: 3}, nil}},
		mysqlBatched: {
			{"multiStatements", "", false, map[byte]int{comQuery: 2}, nil},
			{"multiStatements and interpolateParams, Locker", "&interpolateParams=true", true, map[byte]int{comQuery: 2}, nil},
		},
		pgRow: {{"pgx stdlib", "", false, map[byte]int{'Q': 2, 'B': 1, 'E': 1, 'S': 1}, nil}},
	}
	const pairs = 20
	eachDialect(t, mysqlProc|mysqlStatements|mysqlBatched|pgRow, func(t *testing.T, d *dialect) {
		s := d.server(t)
		for _, tc := range cases[d.id] {
			t.Run(tc.name, func(t *testing.T) {
				dr, wc := d.countedDriver(t, s, tc.params)
				if !d.pg && dr.Capabilities().Name != "mysql" || d.pg && dr.Capabilities().Name != "postgres" {
					t.Fatalf("Capabilities().Name = %q over a %s *sql.DB", dr.Capabilities().Name, d.db)
				}
				key := uniqueKey("roundtrips")
				var pair func(wait bool) error
				if tc.locker {
					l := distlock.New(dr, distlock.WithDefaultTTL(30*time.Second))
					t.Cleanup(func() { _ = l.Close() })
					pair = func(wait bool) error {
						ctx := ctxFor(t, 10*time.Second)
						acq := l.TryAcquire
						if wait {
							acq = l.Acquire
						}
						le, err := acq(ctx, key)
						if err != nil {
							return err
						}
						return le.Release(ctx)
					}
				} else {
					req := backend.Request{Key: key, Owner: "roundtrips-owner", TTL: 30 * time.Second}
					pair = func(wait bool) error {
						ctx := ctxFor(t, 10*time.Second)
						acq := dr.TryAcquire
						if wait {
							acq = dr.Wait
						}
						g, err := acq(ctx, req)
						if err != nil {
							return err
						}
						return g.Lock.Release(ctx)
					}
				}
				for _, wait := range []bool{false, true, false, true} { // row, epoch, spare, connection id
					if err := pair(wait); err != nil {
						t.Fatal(err)
					}
				}
				for _, wait := range []bool{false, true} {
					before := wc.snapshot()
					for range pairs {
						if err := pair(wait); err != nil {
							t.Fatal(err)
						}
					}
					after := wc.snapshot()
					per := tc.want
					if wait && tc.wait != nil {
						per = tc.wait
					}
					for _, c := range d.wireKinds() {
						if got, want := after[c]-before[c], per[c]*pairs; got != want {
							t.Errorf("wait=%v: %d pairs sent %d of kind 0x%02x, want %d (all per pair: before %v, after %v)",
								wait, pairs, got, c, want, before, after)
						}
					}
				}
				// First use of keys (the row created), Inspect: still
				// nothing prepared.
				before := wc.snapshot()
				for range 5 {
					key := uniqueKey("roundtrips-new")
					g, err := dr.TryAcquire(ctxFor(t, 10*time.Second), backend.Request{Key: key, Owner: "o", TTL: 30 * time.Second})
					if err != nil {
						t.Fatal(err)
					}
					if info, err := dr.Inspect(ctxFor(t, 10*time.Second), key, backend.Exclusive); err != nil || !info.Held {
						t.Fatalf("Inspect of a held key: %+v, %v", info, err)
					}
					if err := g.Lock.Release(ctxFor(t, 10*time.Second)); err != nil {
						t.Fatal(err)
					}
					if info, err := dr.Inspect(ctxFor(t, 10*time.Second), key, backend.Exclusive); err != nil || info.Held {
						t.Fatalf("Inspect of a released key: %+v, %v", info, err)
					}
				}
				after := wc.snapshot()
				prepare := d.wireKinds()[0]
				if p := after[prepare] - before[prepare]; p != 0 {
					t.Errorf("new keys and Inspect sent %d prepares (kind 0x%02x), want none (before %v, after %v)", p, prepare, before, after)
				}
			})
		}
	})
}
