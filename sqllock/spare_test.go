package sqllock_test

import (
	"context"
	"testing"
	"time"

	"github.com/distlock/distlock"
	"github.com/distlock/distlock/backend"
	"github.com/distlock/distlock/sqllock"
)

// TestSpares: a released lock's connection stays checked out as a spare
// and carries the next lock; a spare whose session the server ended is
// not used; spares go back to the pool clean after waiting a while
// unused and when the Driver closes; a pool with a connection limit gets
// none.
func TestSpares(t *testing.T) { bothModes(t, testSpares) }

func testSpares(t *testing.T, m mode) {
	s := startServer(t)
	ctx := ctxFor(t, 60*time.Second)
	d, c := newDriverMode(t, s, sqllock.Options{}, m)
	l := distlock.New(d, distlock.WithDefaultTTL(30*time.Second))
	key := uniqueKey("spares")

	release(t, mustAcquire(t, l, key))
	if n := c.db.Stats().InUse; n != 1 {
		t.Fatalf("after a release %d connections are checked out, want 1 (the spare)", n)
	}
	first := holderID(ctx, t, s, key)
	release(t, mustAcquire(t, l, key))
	if id := holderID(ctx, t, s, key); id != first {
		t.Errorf("the second lock ran on connection %d, not on the spare %d", id, first)
	}

	// The server ends the spare's session: the next lock gets another
	// connection, without an error.
	if err := s.killHolder(ctx, key); err != nil {
		t.Fatal(err)
	}
	waitGone(ctx, t, s, first)
	g, err := d.TryAcquire(ctx, backend.Request{Key: key, Owner: "spare-test-owner-0123456789", TTL: 30 * time.Second})
	if err != nil {
		t.Fatalf("TryAcquire after the spare's session was killed: %v", err)
	}
	if id := holderID(ctx, t, s, key); id == first {
		t.Errorf("a lock ran on the killed connection %d", id)
	}
	if err := g.Lock.Release(ctx); err != nil {
		t.Fatal(err)
	}

	// Closing returns the spare to the pool, clean.
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	if n := c.db.Stats().InUse; n != 0 {
		t.Errorf("after Close %d connections are still checked out", n)
	}
	checkMySQLPool(t, c)

	// A spare unused for half its lock's TTL goes back to the pool.
	d2, c2 := newDriverMode(t, s, sqllock.Options{}, m)
	l2 := distlock.New(d2, distlock.WithDefaultTTL(2*time.Second))
	t.Cleanup(func() { _ = l2.Close() })
	release(t, mustAcquire(t, l2, key))
	if n := c2.db.Stats().InUse; n != 1 {
		t.Fatalf("after a release %d connections are checked out, want 1 (the spare)", n)
	}
	deadline := time.Now().Add(5 * time.Second)
	for c2.db.Stats().InUse != 0 {
		if time.Now().After(deadline) {
			t.Fatal("a spare unused for 5 s (TTL 2 s) was not returned to the pool")
		}
		time.Sleep(50 * time.Millisecond)
	}
	checkMySQLPool(t, c2)

	// A pool with a connection limit keeps its connections.
	d3, c3 := newDriverMode(t, s, sqllock.Options{}, m)
	c3.db.SetMaxOpenConns(4)
	l3 := distlock.New(d3, distlock.WithDefaultTTL(30*time.Second))
	t.Cleanup(func() { _ = l3.Close() })
	release(t, mustAcquire(t, l3, key))
	if n := c3.db.Stats().InUse; n != 0 {
		t.Errorf("a pool limited to 4 connections has %d checked out after a release, want 0", n)
	}
}

// holderID is the server id of the connection that last took key.
func holderID(ctx context.Context, t *testing.T, s *server, key string) uint64 {
	t.Helper()
	var id uint64
	q := "SELECT holder_id FROM `" + testTable + sqllock.LiveSuffix + "` WHERE name = ?"
	if err := s.admin.QueryRowContext(ctx, q, key).Scan(&id); err != nil {
		t.Fatalf("holder of %q: %v", key, err)
	}
	return id
}

// waitGone waits until the server has ended session id.
func waitGone(ctx context.Context, t *testing.T, s *server, id uint64) {
	t.Helper()
	for {
		var n int
		err := s.admin.QueryRowContext(ctx, "SELECT COUNT(*) FROM information_schema.PROCESSLIST WHERE ID = ?", id).Scan(&n)
		if err != nil {
			t.Fatal(err)
		}
		if n == 0 {
			return
		}
		select {
		case <-ctx.Done():
			t.Fatalf("session %d still exists after KILL", id)
		case <-time.After(10 * time.Millisecond):
		}
	}
}
