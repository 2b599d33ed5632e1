package sqllock_test

import (
	"context"
	"database/sql"
	"fmt"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"

	"github.com/distlock/distlock"
	"github.com/distlock/distlock/backend"
	"github.com/distlock/distlock/sandbox"
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

// commandCounter counts the commands clients send on connections dialled
// through it, by command byte.
type commandCounter struct {
	mu sync.Mutex
	n  map[byte]int
}

func (cc *commandCounter) snapshot() map[byte]int {
	cc.mu.Lock()
	defer cc.mu.Unlock()
	out := map[byte]int{}
	for k, v := range cc.n {
		out[k] = v
	}
	return out
}

// countConn follows the client→server stream packet by packet (3-byte
// length, sequence number, payload) and counts each packet with sequence
// number 0, a command, by its first payload byte.
type countConn struct {
	net.Conn
	cc     *commandCounter
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
			c.cc.mu.Lock()
			c.cc.n[p[0]]++
			c.cc.mu.Unlock()
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

var countingNets atomic.Int64

// openCounted opens a *sql.DB on s the way users do, sql.Open with a DSN
// and go-sql-driver's defaults (no interpolateParams, no multiStatements;
// params, e.g. "&multiStatements=true", are appended to the DSN), through
// a dialer that counts the commands sent.
func openCounted(t *testing.T, s *server, params string) (*sql.DB, *commandCounter) {
	t.Helper()
	cc := &commandCounter{n: map[byte]int{}}
	name := fmt.Sprintf("sqllock-count-%d", countingNets.Add(1))
	mysql.RegisterDialContext(name, func(ctx context.Context, addr string) (net.Conn, error) {
		var d net.Dialer
		c, err := d.DialContext(ctx, "tcp", addr)
		if err != nil {
			return nil, err
		}
		return &countConn{Conn: c, cc: cc}, nil
	})
	db, err := sql.Open("mysql", fmt.Sprintf("root:%s@%s(%s)/%s?parseTime=true%s",
		sandbox.RootPassword, name, s.addr(), sandbox.Database, params))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = db.Close() })
	return db, cc
}

// TestRoundTrips: per uncontended acquire+release in steady state, the
// commands a Driver sends, counted on the wire. Over a *sql.DB with
// go-sql-driver's defaults: three plain queries for TryAcquire (the
// locking read, the live counter's increment, COMMIT), two for a blocking
// wait (the CALL of the procedure doing both, COMMIT; three with
// NoProcedure), nothing prepared (a prepared statement costs PREPARE,
// EXECUTE and CLOSE: the bare BEGIN; SELECT ... FOR UPDATE; COMMIT over
// the same pool sends four round trips). With multiStatements, two: the
// read and the increment go as one batch.
func TestRoundTrips(t *testing.T) {
	s := startServer(t)
	const pairs = 20
	for _, tc := range []struct {
		name   string
		params string
		locker bool
		noProc bool
		want   map[byte]int // per pair
		wait   map[byte]int // per pair with a blocking wait, if not want
	}{
		// A blocking wait CALLs the procedure: lock and token in one.
		{"default pool", "", false, false, map[byte]int{comQuery: 3}, map[byte]int{comQuery: 2}},
		{"default pool, Locker", "", true, false, map[byte]int{comQuery: 3}, map[byte]int{comQuery: 2}},
		{"default pool, NoProcedure", "", false, true, map[byte]int{comQuery: 3}, nil},
		{"multiStatements", "&multiStatements=true", false, false, map[byte]int{comQuery: 2}, nil},
		{"multiStatements and interpolateParams, Locker", "&multiStatements=true&interpolateParams=true", true, false, map[byte]int{comQuery: 2}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			db, cc := openCounted(t, s, tc.params)
			d, err := sqllock.New(ctxFor(t, 30*time.Second), db, &sqllock.Options{Table: testTable, NoProcedure: tc.noProc})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = d.Close() })
			key := uniqueKey("roundtrips")
			var pair func(wait bool) error
			if tc.locker {
				l := distlock.New(d, distlock.WithDefaultTTL(30*time.Second))
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
					acq := d.TryAcquire
					if wait {
						acq = d.Wait
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
				before := cc.snapshot()
				for range pairs {
					if err := pair(wait); err != nil {
						t.Fatal(err)
					}
				}
				after := cc.snapshot()
				per := tc.want
				if wait && tc.wait != nil {
					per = tc.wait
				}
				for _, c := range []byte{comQuery, comPing, comStmtPrepare, comStmtExecute, comStmtClose} {
					if got, want := after[c]-before[c], per[c]*pairs; got != want {
						t.Errorf("wait=%v: %d pairs sent %d commands 0x%02x, want %d (all per pair: before %v, after %v)",
							wait, pairs, got, c, want, before, after)
					}
				}
			}
		})
	}
}
