package sqllock_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/distlock/distlock/backend"
	"github.com/distlock/distlock/sqllock"
)

// TestPostgresWaitCancel: a Wait whose ctx ends is interrupted in the
// server (pg_cancel_backend) on a session that stays open, not by closing
// its connection; no session is left waiting in the server's lock queue,
// and the lock goes to the next taker as soon as its holder releases it.
func TestPostgresWaitCancel(t *testing.T) {
	s := startPG(t)
	d, _ := dialectRow(pgRow).newDriver(t, s, sqllock.Options{})
	key := uniqueKey("pg-cancel")
	g, err := d.TryAcquire(ctxFor(t, 10*time.Second), backend.Request{Key: key, Owner: "a", TTL: 10 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	waiters := func() []int {
		t.Helper()
		rows, err := s.admin.QueryContext(ctxFor(t, 10*time.Second),
			"SELECT pid FROM pg_stat_activity WHERE wait_event_type = 'Lock' AND datname = current_database()")
		if err != nil {
			t.Fatal(err)
		}
		defer rows.Close()
		var pids []int
		for rows.Next() {
			var pid int
			if err := rows.Scan(&pid); err != nil {
				t.Fatal(err)
			}
			pids = append(pids, pid)
		}
		return pids
	}
	for range 3 {
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() {
			_, err := d.Wait(ctx, backend.Request{Key: key, Owner: "b", TTL: 10 * time.Second})
			done <- err
		}()
		var pids []int
		for deadline := time.Now().Add(10 * time.Second); len(pids) == 0 && time.Now().Before(deadline); {
			time.Sleep(10 * time.Millisecond)
			pids = waiters()
		}
		cancel()
		if err := <-done; !errors.Is(err, context.Canceled) {
			t.Fatalf("Wait on a held key: %v, want the ctx's cancellation", err)
		}
		if len(pids) != 1 {
			t.Fatalf("sessions waiting in the server: %v, want the Wait's", pids)
		}
		var state string
		err := s.admin.QueryRowContext(ctxFor(t, 10*time.Second), "SELECT state FROM pg_stat_activity WHERE pid = $1", pids[0]).Scan(&state)
		if err != nil {
			t.Errorf("the waiter's session %d is gone after the cancel (its connection was closed, not its statement canceled): %v", pids[0], err)
		} else if state != "idle" {
			t.Errorf("the waiter's session %d after the cancel: %s, want idle", pids[0], state)
		}
	}
	if pids := waiters(); len(pids) != 0 {
		t.Errorf("sessions %v still wait for a lock after every Wait returned", pids)
	}
	if err := g.Lock.Release(ctxFor(t, 10*time.Second)); err != nil {
		t.Fatal(err)
	}
	g2, err := d.TryAcquire(ctxFor(t, 10*time.Second), backend.Request{Key: key, Owner: "c", TTL: 10 * time.Second})
	if err != nil {
		t.Fatalf("TryAcquire after the holder released: %v (a canceled waiter took it?)", err)
	}
	_ = g2.Lock.Release(ctxFor(t, 10*time.Second))
}
