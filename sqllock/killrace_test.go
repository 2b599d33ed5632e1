package sqllock_test

import (
	"bytes"
	"context"
	"database/sql"
	"errors"
	"net"
	"regexp"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/distlock/distlock/backend"
	"github.com/distlock/distlock/sqllock"
)

// killRace stages the race a canceled Wait's KILL QUERY can lose: the
// wait's ctx ends while its connection is between two statements, so the
// KILL reaches the session while it is idle (the server ignores a KILL
// QUERY there: the next statement starts afresh), and the blocking
// locking statement is sent only after the KILL has been answered.
type killRace struct {
	armed  atomic.Bool
	cancel context.CancelFunc
	once   sync.Once
	killed chan struct{} // closed when the first KILL QUERY's reply has come back
	mu     sync.Mutex
	target uint64 // the id the first KILL QUERY named
}

var killID = regexp.MustCompile(`KILL QUERY ([0-9]+)`)

type killRaceConn struct {
	net.Conn
	r       *killRace
	killing bool
}

func (c *killRaceConn) Write(b []byte) (int, error) {
	locking := bytes.Contains(b, []byte("FOR UPDATE")) || bytes.Contains(b, []byte("CALL `"))
	if locking && c.r.armed.CompareAndSwap(true, false) {
		c.r.cancel()
		select { // the KILL runs on another connection of the pool
		case <-c.r.killed:
		case <-time.After(5 * time.Second):
		}
	}
	if m := killID.FindSubmatch(b); m != nil {
		c.killing = true
		c.r.mu.Lock()
		if c.r.target == 0 {
			c.r.target, _ = strconv.ParseUint(string(m[1]), 10, 64)
		}
		c.r.mu.Unlock()
	}
	return c.Conn.Write(b)
}

func (c *killRaceConn) Read(b []byte) (int, error) {
	n, err := c.Conn.Read(b)
	if c.killing && n > 0 {
		c.killing = false
		c.r.once.Do(func() { close(c.r.killed) })
	}
	return n, err
}

// newKillRaceDB is newDB whose connections stage r.
func (s *server) newKillRaceDB(r *killRace, batch bool) *sql.DB {
	return sql.OpenDB(s.mysqlConnector(s.addr, batch, func(c net.Conn) net.Conn { return &killRaceConn{Conn: c, r: r} }))
}

// TestWaitCancelBetweenStatements: a Wait whose ctx ends while its
// connection is between statements, so that its KILL QUERY lands on an
// idle session and the blocking locking read is sent after it, still
// interrupts that read in the server: no session is left waiting for the
// row lock once Wait has returned (a ghost waiter would take the lock
// when its holder releases it, and a ghost writer would keep readers out
// until the server's lock-wait timeout).
func TestWaitCancelBetweenStatements(t *testing.T) { allModes(t, testWaitCancelBetweenStatements) }

func testWaitCancelBetweenStatements(t *testing.T, m mode) {
	s := startServer(t)
	holder, _ := newDriverMode(t, s, sqllock.Options{}, m)
	key := uniqueKey("killrace")
	g, err := holder.TryAcquire(ctxFor(t, 10*time.Second), backend.Request{Key: key, Owner: "owner-holder-0123456789ab", TTL: 30 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = g.Lock.Release(ctxFor(t, 10*time.Second)) }()

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	r := &killRace{cancel: cancel, killed: make(chan struct{})}
	db := s.newKillRaceDB(r, m.batch)
	defer db.Close()
	d, err := sqllock.New(ctxFor(t, 30*time.Second), db, &sqllock.Options{Table: testTable, NoProcedure: m.noProc})
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	r.armed.Store(true)
	_, err = d.Wait(ctx, backend.Request{Key: key, Owner: "owner-waiter-0123456789ab", TTL: 30 * time.Second})
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("Wait: %v, want the ctx's cancellation", err)
	}
	r.mu.Lock()
	id := r.target
	r.mu.Unlock()
	if id == 0 {
		t.Fatal("the race was not staged: no KILL QUERY was sent")
	}
	var n int
	err = s.admin.QueryRowContext(ctxFor(t, 10*time.Second),
		"SELECT COUNT(*) FROM information_schema.INNODB_TRX WHERE trx_mysql_thread_id = ? AND trx_state = 'LOCK WAIT'", id).Scan(&n)
	if err != nil {
		t.Fatal(err)
	}
	if n != 0 {
		t.Errorf("session %d still waits for the row lock after the canceled Wait returned: a ghost waiter", id)
	}
}
