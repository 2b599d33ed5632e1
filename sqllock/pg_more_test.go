package sqllock_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/distlock/distlock"
	"github.com/distlock/distlock/sqllock"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/stdlib"
)

func newPGLockerOpts(t *testing.T, s *pgServer, ttl time.Duration, opts sqllock.Options) (*distlock.Locker, *client) {
	t.Helper()
	d, c := newPGDriver(t, s, opts)
	l := distlock.New(d, distlock.WithDefaultTTL(ttl))
	t.Cleanup(func() { _ = l.Close() })
	return l, c
}

// bothPGModes runs f in row mode, then in advisory mode.
func bothPGModes(t *testing.T, f func(t *testing.T, advisory bool)) {
	t.Run("row", func(t *testing.T) { f(t, false) })
	t.Run("advisory", func(t *testing.T) { f(t, true) })
}

// TestPostgresFirstTimeLockers: lockers that meet on a brand-new name (no
// row yet), blocking and non-blocking at once, never see a deadlock or any
// error but ErrNotAcquired, and exactly one holds at a time.
func TestPostgresFirstTimeLockers(t *testing.T) {
	bothPGModes(t, func(t *testing.T, advisory bool) {
		s := startPG(t)
		const lockers, perLocker, names = 3, 3, 10
		ls := make([]*distlock.Locker, lockers)
		for i := range ls {
			ls[i], _ = newPGLockerOpts(t, s, 5*time.Second, sqllock.Options{Advisory: advisory})
		}
		for n := range names {
			key := uniqueKey("pg-first")
			var (
				wg      sync.WaitGroup
				mu      sync.Mutex
				inside  int
				overlap bool
			)
			start := make(chan struct{})
			for i, l := range ls {
				for j := range perLocker {
					wg.Go(func() {
						<-start
						var le *distlock.Lease
						var err error
						if (i+j+n)%2 == 0 {
							le, err = l.Acquire(ctxFor(t, 30*time.Second), key)
						} else {
							le, err = l.TryAcquire(ctxFor(t, 30*time.Second), key)
						}
						if errors.Is(err, distlock.ErrNotAcquired) {
							return
						}
						if err != nil {
							var pe *pgconn.PgError
							if errors.As(err, &pe) && pe.Code == "40P01" {
								t.Errorf("a deadlock reached the user: %v", err)
							} else {
								t.Errorf("first-time locker: %v", err)
							}
							return
						}
						mu.Lock()
						inside++
						overlap = overlap || inside > 1
						mu.Unlock()
						time.Sleep(time.Millisecond)
						mu.Lock()
						inside--
						mu.Unlock()
						release(t, le)
					})
				}
			}
			close(start)
			wg.Wait()
			if overlap {
				t.Fatalf("name %d: two holders at once", n)
			}
		}
	})
}

// TestPostgresLockWaitTimeout: a server-side wait ended by lock_timeout
// (55P03) is retried within the caller's ctx; the caller's deadline is
// what ends a wait. The pool keeps only clean connections.
func TestPostgresLockWaitTimeout(t *testing.T) {
	bothPGModes(t, func(t *testing.T, advisory bool) {
		s := startPG(t)
		waiter, c := newPGLockerOpts(t, s, 5*time.Second, sqllock.Options{LockWaitTimeout: time.Second, Advisory: advisory})
		holder, _ := newPGLockerOpts(t, s, 5*time.Second, sqllock.Options{Advisory: advisory})
		key := uniqueKey("pg-lwt")
		le := mustAcquire(t, holder, key)
		const hold = 1500 * time.Millisecond // above lock_timeout: at least one retry
		time.AfterFunc(hold, func() { release(t, le) })
		t0 := time.Now()
		lw, err := waiter.Acquire(ctxFor(t, 20*time.Second), key)
		if err != nil {
			t.Fatalf("a wait longer than lock_timeout failed: %v", err)
		}
		took := time.Since(t0)
		t.Logf("waited %v across server lock timeouts of 1s", took)
		if took < hold-100*time.Millisecond {
			t.Errorf("granted after %v while the holder held it for %v", took, hold)
		}
		release(t, lw)

		le = mustAcquire(t, holder, key)
		defer release(t, le)
		ctx, cancel := context.WithTimeout(context.Background(), 1200*time.Millisecond)
		defer cancel()
		if _, err = waiter.Acquire(ctx, key); !errors.Is(err, context.DeadlineExceeded) {
			t.Errorf("a wait past the caller's deadline returned %v, want context.DeadlineExceeded", err)
		}
		if err := waiter.Close(); err != nil { // its spares go back to the pool
			t.Fatal(err)
		}
		checkPGPool(t, c)
	})
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

// TestPostgresTokensAcrossRestart: tokens go on from the committed counter
// after a server restart, in both modes.
func TestPostgresTokensAcrossRestart(t *testing.T) {
	s := startPG(t)
	row, _ := newPGLockerOpts(t, s, 5*time.Second, sqllock.Options{})
	adv, _ := newPGLockerOpts(t, s, 5*time.Second, sqllock.Options{Advisory: true, Table: "distlock_test_adv"})
	kr, ka := uniqueKey("pg-restart"), uniqueKey("pg-restart-adv")
	take := func(l *distlock.Locker, key string) uint64 {
		t.Helper()
		le, err := l.Acquire(ctxFor(t, 30*time.Second), key)
		if err != nil {
			t.Fatal(err)
		}
		defer release(t, le)
		return le.Token()
	}
	var lastR, lastA uint64
	for range 3 {
		lastR, lastA = take(row, kr), take(adv, ka)
	}
	ctx := ctxFor(t, 3*time.Minute)
	if err := s.g.Node(0).Stop(ctx); err != nil {
		t.Fatal(err)
	}
	if err := s.g.Node(0).Start(ctx); err != nil {
		t.Fatal(err)
	}
	if tok := take(row, kr); tok <= lastR {
		t.Errorf("row mode: token %d after the restart, not above %d", tok, lastR)
	}
	if tok := take(adv, ka); tok <= lastA {
		t.Errorf("advisory mode: token %d after the restart, not above %d", tok, lastA)
	}
}
