package sqllock_test

import (
	"context"
	"database/sql"
	"errors"
	"github.com/distlock/distlock/backend"
	"github.com/jackc/pgx/v5/pgxpool"
	"testing"
	"time"

	"github.com/distlock/distlock"
	"github.com/distlock/distlock/sqllock"
	"github.com/jackc/pgx/v5/stdlib"
)

// checkMySQLPool takes every idle connection of c's pool at once and checks
// that none has a transaction open, autocommit off, or a session timeout
// left by a lock.
func checkMySQLPool(t *testing.T, c *client) {
	t.Helper()
	ctx := ctxFor(t, 30*time.Second)
	idle := c.db.Stats().Idle
	conns := make([]*sql.Conn, 0, idle+1)
	defer func() {
		for _, cn := range conns {
			_ = cn.Close()
		}
	}()
	for range idle + 1 { // one more than were idle: every idle one is among them
		cn, err := c.db.Conn(ctx)
		if err != nil {
			t.Fatalf("checking the pool: %v", err)
		}
		conns = append(conns, cn)
	}
	for i, cn := range conns {
		var autocommit, inTx, waitOK, lwtOK int
		err := cn.QueryRowContext(ctx, "SELECT @@autocommit, @@in_transaction, "+
			"@@session.wait_timeout = @@global.wait_timeout, "+
			"@@session.innodb_lock_wait_timeout = @@global.innodb_lock_wait_timeout").Scan(&autocommit, &inTx, &waitOK, &lwtOK)
		if err != nil {
			t.Fatalf("checking pooled connection %d: %v", i, err)
		}
		if autocommit != 1 || inTx != 0 || waitOK != 1 || lwtOK != 1 {
			t.Errorf("pooled connection %d of %d: autocommit=%d in_transaction=%d default wait_timeout=%d default lock_wait_timeout=%d",
				i, len(conns), autocommit, inTx, waitOK, lwtOK)
		}
	}
	t.Logf("%d pooled connections clean", idle)
}

// checkPGPool checks every idle connection of c's pool: no transaction
// open, and the server's defaults for the settings the driver changes (it
// changes them only with SET LOCAL).
func checkPGPool(t *testing.T, c *client) {
	t.Helper()
	ctx := ctxFor(t, 10*time.Second)
	n := c.db.Stats().Idle
	conns := make([]interface{ Close() error }, 0, n)
	for range n {
		conn, err := c.db.Conn(ctx)
		if err != nil {
			t.Fatal(err)
		}
		conns = append(conns, conn)
		var inTx bool
		_ = conn.Raw(func(dc any) error {
			inTx = dc.(*stdlib.Conn).Conn().PgConn().TxStatus() != 'I'
			return nil
		})
		var idle, lt, st string
		err = conn.QueryRowContext(ctx, "SELECT current_setting('idle_in_transaction_session_timeout'), current_setting('lock_timeout'), "+
			"current_setting('statement_timeout')").Scan(&idle, &lt, &st)
		if err != nil {
			t.Fatalf("a pooled connection: %v", err)
		}
		if idle != "0" || lt != "0" || st != "0" || inTx {
			t.Errorf("a pooled connection: idle_in_transaction_session_timeout=%s lock_timeout=%s statement_timeout=%s in a transaction=%v; want the defaults, none open", idle, lt, st, inTx)
		}
	}
	for _, conn := range conns {
		_ = conn.Close()
	}
	if n == 0 {
		t.Error("no idle connection in the pool to check")
	}
	t.Logf("%d pooled connections clean", n)
}

// TestPoolHygiene: after a release, a refused TryAcquire, a canceled or
// timed-out wait, a renewal that changed the session's timeout and a lock
// whose session was killed, no connection in the pool has a transaction
// open, autocommit off or a lock's session settings.
func TestPoolHygiene(t *testing.T) { allModes(t, testPoolHygiene) }

func testPoolHygiene(t *testing.T, m mode) {
	s := startServer(t)
	d, c := newDriverMode(t, s, sqllock.Options{LockWaitTimeout: time.Second}, m)
	l := distlock.New(d, distlock.WithDefaultTTL(2*time.Second))
	t.Cleanup(func() { _ = l.Close() })
	other := newLockerMode(t, s, 5*time.Second, m)

	key := uniqueKey("hygiene")
	le := mustAcquire(t, l, key)
	if err := le.Refresh(ctxFor(t, 10*time.Second), 7*time.Second); err != nil {
		t.Fatalf("Refresh to a longer TTL: %v", err)
	}
	release(t, le)
	checkMySQLPool(t, c)

	held := mustAcquire(t, other, key)
	if _, err := l.TryAcquire(ctxFor(t, 10*time.Second), key); !errors.Is(err, distlock.ErrNotAcquired) {
		t.Fatalf("TryAcquire of a held key: %v", err)
	}
	checkMySQLPool(t, c)

	ctx, cancel := context.WithTimeout(context.Background(), 1500*time.Millisecond) // past one server lock-wait timeout
	_, err := l.Acquire(ctx, key)
	cancel()
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Acquire past its deadline: %v", err)
	}
	ctx, cancel = context.WithCancel(context.Background())
	time.AfterFunc(200*time.Millisecond, cancel)
	if _, err := l.Acquire(ctx, key); !errors.Is(err, context.Canceled) {
		t.Fatalf("canceled Acquire: %v", err)
	}
	release(t, held)
	checkMySQLPool(t, c)

	le = mustAcquire(t, l, key)
	if err := s.killHolder(ctxFor(t, 10*time.Second), key); err != nil {
		t.Fatal(err)
	}
	select {
	case <-le.Done():
	case <-time.After(10 * time.Second):
		t.Fatal("a lock whose session was killed was not reported lost")
	}
	if err := le.Release(ctxFor(t, 10*time.Second)); err == nil {
		t.Error("Release of a lost lease succeeded")
	}
	checkMySQLPool(t, c)
}

// TestPostgresNewPool: a Driver over a *pgxpool.Pool locks, excludes, and
// leaves the pool open and whole when it closes.
func TestPostgresNewPool(t *testing.T) {
	s := startPG(t)
	ctx := ctxFor(t, 30*time.Second)
	pool, err := pgxpool.New(ctx, pgURL(s.addr())+"&pool_max_conns=6")
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	d, err := sqllock.NewPool(ctx, pool, &sqllock.Options{Table: testTable})
	if err != nil {
		t.Fatal(err)
	}
	key := uniqueKey("pg-pool")
	g, err := d.TryAcquire(ctx, backend.Request{Key: key, Owner: "a", TTL: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := d.TryAcquire(ctx, backend.Request{Key: key, Owner: "b", TTL: 5 * time.Second}); !errors.Is(err, backend.ErrNotAcquired) {
		t.Fatalf("second TryAcquire: %v, want ErrNotAcquired", err)
	}
	if err := g.Lock.Release(ctx); err != nil {
		t.Fatal(err)
	}
	for range 10 { // more pairs than the pool has connections: none is kept
		g, err := d.TryAcquire(ctx, backend.Request{Key: key, Owner: "c", TTL: 5 * time.Second})
		if err != nil {
			t.Fatal(err)
		}
		if err := g.Lock.Release(ctx); err != nil {
			t.Fatal(err)
		}
	}
	if err := d.Close(); err != nil {
		t.Fatal(err)
	}
	var one int
	if err := pool.QueryRow(ctx, "SELECT 1").Scan(&one); err != nil {
		t.Fatalf("the pool after the Driver closed: %v", err)
	}
	if _, err := sqllock.NewPool(ctx, nil, nil); !errors.Is(err, backend.ErrInvalidConfig) {
		t.Errorf("NewPool(nil): %v", err)
	}
}
