package sqllock_test

import (
	"database/sql"
	"sync/atomic"
	"testing"
	"time"

	"github.com/distlock/distlock"
	"github.com/distlock/distlock/sqllock"
)

// slowFirstDial returns an address function for newDB that makes the
// next dial after arm take slow (a new connection on a busy machine:
// connect, authentication, a new server process), and every other dial
// none.
func slowFirstDial(addr func() string, slow time.Duration) (func() string, func()) {
	var armed atomic.Bool
	return func() string {
			if armed.CompareAndSwap(true, false) {
				time.Sleep(slow) // the slow connect itself, not a synchronisation
			}
			return addr()
		}, func() {
			armed.Store(true)
		}
}

// TestTryAcquireValidFromLockingStatement: a TryAcquire's validity counts
// from when its locking statement was sent, not from before the driver
// opened the connection it sends it on. Nothing is locked before that
// statement, and the store's bound (the session's idle timeout) runs
// from after it, so a slow connect must not cost the lease its validity.
// Before, the Locker counted from its call: a connect slower than the
// TTL made a grant that arrived "after its validity ran out".
func TestTryAcquireValidFromLockingStatement(t *testing.T) {
	const ttl = time.Second
	const slow = 3 * ttl / 2
	check := func(t *testing.T, db *sql.DB, arm func(), opts sqllock.Options) {
		// Every pin opens a connection: none idle in the pool, and no
		// spares (kept only by a pool without a limit).
		db.SetMaxIdleConns(0)
		db.SetMaxOpenConns(64)
		t.Cleanup(func() { _ = db.Close() })
		d, err := sqllock.New(ctxFor(t, 30*time.Second), db, &opts)
		if err != nil {
			t.Fatalf("New: %v", err)
		}
		l := distlock.New(d, distlock.WithDefaultTTL(ttl))
		t.Cleanup(func() { _ = l.Close() })
		key := uniqueKey("validfrom")
		// The key's row exists, so the acquisition needs one connection.
		release(t, mustTry(t, l, key))
		arm()
		called := time.Now()
		le, err := l.TryAcquire(ctxFor(t, 30*time.Second), key)
		if err != nil {
			t.Fatalf("TryAcquire over a connection that took %v to open (TTL %v): %v", slow, ttl, err)
		}
		took := time.Since(called)
		if took < slow {
			t.Fatalf("precondition: the acquisition took %v, less than the slow connect (%v)", took, slow)
		}
		if left := time.Until(le.Deadline()); left <= 0 {
			t.Fatalf("granted with its deadline passed (%v ago)", -left)
		}
		t.Logf("acquired in %v; %v of validity left", took.Round(time.Millisecond), time.Until(le.Deadline()).Round(time.Millisecond))
		release(t, le)
	}
	eachDialect(t, mysqlProc|allPG, func(t *testing.T, d *dialect) {
		s := d.server(t)
		addr, arm := slowFirstDial(s.addr, slow)
		check(t, s.newDB(addr, false), arm, d.options(sqllock.Options{}))
	})
}

func mustTry(t *testing.T, l *distlock.Locker, key string) *distlock.Lease {
	t.Helper()
	le, err := l.TryAcquire(ctxFor(t, 30*time.Second), key)
	if err != nil {
		t.Fatalf("TryAcquire: %v", err)
	}
	return le
}
