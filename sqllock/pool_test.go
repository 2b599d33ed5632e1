package sqllock_test

import (
	"context"
	"database/sql"
	"errors"
	"testing"
	"time"

	"github.com/distlock/distlock"
	"github.com/distlock/distlock/sqllock"
)

// checkPool takes every idle connection of c's pool at once and checks
// that none has a transaction open, autocommit off, or a session timeout
// left by a lock.
func checkPool(t *testing.T, c *client) {
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
	checkPool(t, c)

	held := mustAcquire(t, other, key)
	if _, err := l.TryAcquire(ctxFor(t, 10*time.Second), key); !errors.Is(err, distlock.ErrNotAcquired) {
		t.Fatalf("TryAcquire of a held key: %v", err)
	}
	checkPool(t, c)

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
	checkPool(t, c)

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
	checkPool(t, c)
}
