package sqllock_test

import (
	"testing"
	"time"

	"github.com/distlock/distlock/backend"
	"github.com/distlock/distlock/sqllock"
)

// TestSessionIdleSharedSessionReplaced: a shared session that held
// nothing for longer than its idle timeout (the TTL) was ended by the
// server; the Driver's next try on it must get a new session, not fail.
// It failed with ErrUnavailable ("terminating connection due to
// idle-session timeout", MySQL's "invalid connection"): conformance
// PartitionedHolderReacquires's rival, idle for a TTL between two rounds,
// saw it on both session rows.
func TestSessionIdleSharedSessionReplaced(t *testing.T) {
	for _, id := range []rowSet{pgSession, mysqlSession} {
		d := dialectRow(id)
		t.Run(d.db, func(t *testing.T) {
			s := d.server(t)
			a, _ := d.newDriver(t, s, sqllock.Options{Sessions: 1})
			ctx := ctxFor(t, time.Minute)
			req := backend.Request{Key: uniqueKey("idle"), Owner: "owner-idle-0123456789", TTL: time.Second}
			g, err := a.TryAcquire(ctx, req)
			if err != nil {
				t.Fatalf("first try: %v", err)
			}
			if err := g.Lock.Release(ctx); err != nil {
				t.Fatalf("release: %v", err)
			}
			pids := sqllock.SessionPIDs(a)
			if len(pids) == 0 {
				t.Fatal("no shared session open after a grant")
			}
			q := "SELECT COUNT(*) FROM information_schema.PROCESSLIST WHERE ID = ?"
			if s.pg {
				q = "SELECT count(*) FROM pg_stat_activity WHERE pid = $1"
			}
			for _, pid := range pids { // until the server ended the idle session
				for n := 1; n > 0; {
					if err := s.admin.QueryRowContext(ctx, q, pid).Scan(&n); err != nil {
						t.Fatalf("session %d: %v", pid, err)
					}
					select {
					case <-ctx.Done():
						t.Fatalf("the server never ended the idle session %d", pid)
					case <-time.After(20 * time.Millisecond): // the server's idle timeout: no event to wait on
					}
				}
			}
			g, err = a.TryAcquire(ctx, req)
			if err != nil {
				t.Fatalf("try after the server ended the Driver's idle session: %v, want a grant (the server is up)", err)
			}
			_ = g.Lock.Release(ctx)
		})
	}
}
