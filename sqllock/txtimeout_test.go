package sqllock_test

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/distlock/distlock"
	"github.com/distlock/distlock/backend"
	"github.com/distlock/distlock/sqllock"
)

// TestPostgresVersionHasTxTimeout: transaction_timeout is PostgreSQL 17's;
// the server_version a connection reports at start-up says whether the
// server has it.
func TestPostgresVersionHasTxTimeout(t *testing.T) {
	for v, want := range map[string]bool{
		"15.18 (Debian 15.18-0+deb12u1)": false, "16.4": false, "9.6.24": false, "": false, "1": false,
		"17.0": true, "17.2 (Debian 17.2-1.pgdg120+1)": true, "17beta1": true, "18devel": true, "100.1": true,
	} {
		if got := sqllock.VersionHasTxTimeout(v); got != want {
			t.Errorf("server_version %q: has transaction_timeout = %v, want %v", v, got, want)
		}
	}
}

// TestPostgresTransactionTimeoutOff: a DBA's transaction_timeout
// (PostgreSQL 17) would end a lock's session, and the lock, before its
// TTL; lock transactions turn it off. Against a 17 server: with the role's
// transaction_timeout at 1 s a 5 s lock outlives 2.5 s, still held. Against
// an older server (which has no such setting, and refuses it by name): the
// lock, semaphore and read-write lock transactions send the SET when the
// Driver takes the server for a 17 (so it is in their batches), and leave
// it out when the server says it is older.
func TestPostgresTransactionTimeoutOff(t *testing.T) {
	s := startPG(t)
	var num string
	if err := s.admin.QueryRowContext(ctxFor(t, 10*time.Second), "SHOW server_version_num").Scan(&num); err != nil {
		t.Fatal(err)
	}
	n, err := strconv.Atoi(num)
	if err != nil {
		t.Fatal(err)
	}
	if n >= 170000 {
		if _, err := s.admin.ExecContext(ctxFor(t, 10*time.Second), "ALTER ROLE CURRENT_USER SET transaction_timeout = '1s'"); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			_, _ = s.admin.ExecContext(context.Background(), "ALTER ROLE CURRENT_USER RESET transaction_timeout")
		})
		l, _ := dialectRow(pgRow).newLocker(t, s, 5*time.Second, sqllock.Options{})
		le, err := l.Acquire(ctxFor(t, 10*time.Second), uniqueKey("txtimeout"), distlock.WithoutAutoRenew())
		if err != nil {
			t.Fatal(err)
		}
		time.Sleep(2500 * time.Millisecond) // the fault: 2.5 s in the lock's transaction, beyond transaction_timeout
		if err := le.Refresh(ctxFor(t, 10*time.Second), 0); err != nil {
			t.Fatalf("a 5s lock after 2.5s under a 1s transaction_timeout: %v", err)
		}
		release(t, le)
		return
	}
	t.Logf("server_version_num %d: no transaction_timeout; checking the SET is sent where the Driver takes the server for a 17", n)
	req := backend.Request{Key: uniqueKey("txtimeout"), Owner: "owner-txt-0123456789abcdef", TTL: 5 * time.Second}
	assumed, _ := dialectRow(pgRow).newDriver(t, s, sqllock.Options{})
	sqllock.AssumeTxTimeout(assumed)
	refused := func(what string, err error) {
		t.Helper()
		if err == nil || !strings.Contains(err.Error(), "transaction_timeout") {
			t.Errorf("%s on a %d server, taken for a 17: %v, want the server's refusal of transaction_timeout (the SET is not sent)", what, n, err)
		}
	}
	_, err = assumed.TryAcquire(ctxFor(t, 10*time.Second), req)
	refused("TryAcquire", err)
	_, err = assumed.Wait(ctxFor(t, 10*time.Second), req)
	refused("Wait", err)
	_, err = assumed.TryAcquire(ctxFor(t, 10*time.Second), permitsReq(req, 2, 1))
	refused("semaphore", err)
	_, err = assumed.TryAcquire(ctxFor(t, 10*time.Second), kindReq(req, backend.Read, false))
	refused("read lock", err)
	_, err = assumed.TryAcquire(ctxFor(t, 10*time.Second), kindReq(req, backend.Write, false))
	refused("write lock", err)

	plain, _ := dialectRow(pgRow).newDriver(t, s, sqllock.Options{})
	g, err := plain.TryAcquire(ctxFor(t, 10*time.Second), req)
	if err != nil {
		t.Fatalf("TryAcquire on a %d server: %v", n, err)
	}
	if err := g.Lock.Release(ctxFor(t, 10*time.Second)); err != nil && !errors.Is(err, backend.ErrNotHeld) {
		t.Fatal(err)
	}
}
