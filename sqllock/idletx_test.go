package sqllock_test

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/distlock/distlock/backend"
	"github.com/distlock/distlock/sqllock"
)

// TestIdleTransactionTimeout: MariaDB's idle_transaction_timeout and its
// read-only and write variants, set by a DBA to end forgotten
// transactions, would end a lock's session, and with it the lock, long
// before its TTL while the holder's validity still runs (another Driver
// took the lock 2.5 s into a 10 s TTL). The lock's session turns them
// off: its idle bound is wait_timeout, the TTL.
func TestIdleTransactionTimeout(t *testing.T) {
	s := startServer(t)
	for _, v := range []string{"idle_transaction_timeout", "idle_readonly_transaction_timeout", "idle_write_transaction_timeout"} {
		var old int
		if err := s.admin.QueryRowContext(ctxFor(t, 10*time.Second), "SELECT @@GLOBAL."+v).Scan(&old); err != nil {
			t.Skipf("no %s on this server: %v", v, err)
		}
		if _, err := s.admin.ExecContext(ctxFor(t, 10*time.Second), fmt.Sprintf("SET GLOBAL %s = 1", v)); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			_, _ = s.admin.ExecContext(ctxFor(t, 10*time.Second), fmt.Sprintf("SET GLOBAL %s = %d", v, old))
		})
	}
	type held struct {
		m     mode
		key   string
		g     backend.Grant
		other *sqllock.Driver
	}
	var hs []held
	for _, m := range []mode{{}, {batch: true}} {
		d, _ := newDriverMode(t, s, sqllock.Options{}, m) // new sessions: the global values
		other, _ := newDriverMode(t, s, sqllock.Options{}, m)
		key := uniqueKey("idletx")
		g, err := d.TryAcquire(ctxFor(t, 10*time.Second), backend.Request{Key: key, Owner: "owner-idletx-0123456789ab", TTL: 10 * time.Second})
		if err != nil {
			t.Fatal(err)
		}
		hs = append(hs, held{m, key, g, other})
	}
	time.Sleep(2500 * time.Millisecond) // silent, well within the 10 s TTL
	for _, h := range hs {
		g2, err := h.other.TryAcquire(ctxFor(t, 10*time.Second), backend.Request{Key: h.key, Owner: "owner-other-0123456789ab", TTL: 10 * time.Second})
		if err == nil {
			_ = g2.Lock.Release(ctxFor(t, 10*time.Second))
			t.Errorf("batch=%v: another driver took the lock 2.5 s into its holder's 10 s TTL (an idle transaction timeout of 1 s ended the holder's session)", h.m.batch)
		} else if !errors.Is(err, backend.ErrNotAcquired) {
			t.Fatal(err)
		}
		if err := h.g.Lock.Release(ctxFor(t, 10*time.Second)); err != nil {
			t.Errorf("batch=%v: Release: %v", h.m.batch, err)
		}
	}
}
