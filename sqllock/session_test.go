package sqllock_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/distlock/distlock"
	"github.com/distlock/distlock/backend"
	"github.com/distlock/distlock/sqllock"
)

// TestSessionManyLeases: in session mode one Driver holds many leases
// over its Sessions shared connections (no connection per lease), keeps
// them all through renewal rounds, declares batch refresh, and refuses
// the kinds it does not build (semaphores, read-write locks) with
// ErrUnsupported.
func TestSessionManyLeases(t *testing.T) {
	d := dialectRow(pgSession)
	s := d.server(t)
	const n, ttl = 300, 2 * time.Second
	dr, c := d.newDriver(t, s, sqllock.Options{Sessions: 2})
	caps := dr.Capabilities()
	if !caps.Offers(dr).BatchRefresh || caps.Semaphore != "" || caps.RW != "" {
		t.Errorf("Capabilities = %+v, want batch refresh, no semaphore, no rw", caps)
	}
	l := distlock.New(dr, distlock.WithDefaultTTL(ttl))
	t.Cleanup(func() { _ = l.Close() })
	ctx := ctxFor(t, time.Minute)
	var leases []*distlock.Lease
	base := uniqueKey("many")
	for i := range n {
		le, err := l.TryAcquire(ctx, fmt.Sprintf("%s-%d", base, i))
		if err != nil {
			t.Fatalf("lease %d: %v", i, err)
		}
		leases = append(leases, le)
	}
	if st := c.db.Stats(); st.InUse > 2 {
		t.Errorf("%d leases held over %d connections in use, want at most Sessions (2)", n, st.InUse)
	}
	// Three renewal rounds (at TTL/3): none is lost.
	// A lease lost ends its Done; none may within 1.5 TTL.
	select {
	case <-leases[0].Done():
	case <-leases[n-1].Done():
	case <-time.After(ttl + ttl/2):
	}
	for _, le := range leases {
		if err := le.Err(); err != nil {
			t.Fatalf("lease %s after renewal rounds: %v", le.Key(), err)
		}
	}
	if st := c.db.Stats(); st.InUse > 2 {
		t.Errorf("after renewals: %d connections in use, want at most 2", st.InUse)
	}
	for _, le := range leases {
		if err := le.Release(ctx); err != nil {
			t.Errorf("release %s: %v", le.Key(), err)
		}
	}
	_, err := dr.TryAcquire(ctx, backend.Request{Kind: backend.Permits, Key: uniqueKey("sem"), Owner: "owner-sem-0123456789abcdef", Limit: 2, Permits: 1, TTL: ttl})
	if !errors.Is(err, backend.ErrUnsupported) {
		t.Errorf("a semaphore in session mode: %v, want ErrUnsupported", err)
	}
}

// eachSessionStore runs f as a subtest for PostgreSQL and MySQL in
// session mode (d), with the store's server s started.
func eachSessionStore(t *testing.T, f func(t *testing.T, d *dialect, s *server)) {
	for _, id := range []rowSet{pgSession, mysqlSession} {
		d := dialectRow(id)
		t.Run(d.db, func(t *testing.T) { f(t, d, d.server(t)) })
	}
}

// untilSessionWaiting polls, through a, until a connection (b's) waits
// in the server's queue for key. A value on got (b's wait returned while
// a held the key) fails t; a nil got is never read.
func untilSessionWaiting[R any](ctx context.Context, t *testing.T, a *sqllock.Driver, key string, got <-chan R) {
	t.Helper()
	for {
		n, err := sqllock.SessionWaiting(ctx, a, key)
		if err != nil {
			t.Fatalf("waiters: %v", err)
		}
		if n > 0 {
			return
		}
		select {
		case r := <-got:
			t.Fatalf("b's wait returned while a held the key: %+v", r)
		case <-ctx.Done():
			t.Fatal("b never waited in the server's queue")
		case <-time.After(5 * time.Millisecond):
		}
	}
}

// TestSessionHandoffFIFO: in session mode a waiter that the server's
// queue reaches keeps the key (the lease moves onto its waiter
// connection), so the holder that released it cannot take it back with a
// try before the waiter has it. Before, a woken waiter let the key go and
// tried it on its shared session, and the holder's immediate try won that
// race.
func TestSessionHandoffFIFO(t *testing.T) {
	eachSessionStore(t, func(t *testing.T, d *dialect, s *server) {
		a, _ := d.newDriver(t, s, sqllock.Options{})
		b, _ := d.newDriver(t, s, sqllock.Options{})
		ctx := ctxFor(t, time.Minute)
		key := uniqueKey("fifo")
		req := backend.Request{Key: key, Owner: "owner-fifo-a-0123456789", TTL: 5 * time.Second}
		ga, err := a.TryAcquire(ctx, req)
		if err != nil {
			t.Fatalf("a: %v", err)
		}
		type res struct {
			g   backend.Grant
			err error
		}
		got := make(chan res, 1)
		go func() {
			g, err := b.Wait(ctx, backend.Request{Key: key, Owner: "owner-fifo-b-0123456789", TTL: 5 * time.Second})
			got <- res{g, err}
		}()
		untilSessionWaiting(ctx, t, a, key, got)
		if err := ga.Lock.Release(ctx); err != nil {
			t.Fatalf("a's release: %v", err)
		}
		if g, err := a.TryAcquire(ctx, req); err == nil {
			_ = g.Lock.Release(ctx)
			t.Fatal("a took the key back with a try while b waited in the queue for it")
		} else if !errors.Is(err, backend.ErrNotAcquired) {
			t.Fatalf("a's try: %v", err)
		}
		r := <-got
		if r.err != nil {
			t.Fatalf("b: %v", r.err)
		}
		if r.g.Token <= ga.Token {
			t.Errorf("b's token %d, want above a's %d", r.g.Token, ga.Token)
		}
		if err := r.g.Lock.Refresh(ctx, 5*time.Second); err != nil {
			t.Errorf("b's refresh on its waiter session: %v", err)
		}
		if err := r.g.Lock.Release(ctx); err != nil {
			t.Errorf("b's release: %v", err)
		}
		// The waiter session, released, takes the next wait.
		g, err := a.TryAcquire(ctx, req)
		if err != nil {
			t.Fatalf("a after b: %v", err)
		}
		_ = g.Lock.Release(ctx)
	})
}

// TestSessionWaiterPausedAfterGrant: a waiter whose process pauses after
// the server granted it the key (its reply read, the lease not yet
// settled) for longer than the TTL finds, on waking, that the server ended
// its idle session and gave the key to another client: it must not return
// a lease. It did (the lease's time counted from when the reply was read),
// and the fault suite saw two holders (postgres-session, seed 108207017,
// a client stopped while waiting).
func TestSessionWaiterPausedAfterGrant(t *testing.T) {
	eachSessionStore(t, func(t *testing.T, d *dialect, s *server) {
		a, _ := d.newDriver(t, s, sqllock.Options{})
		b, _ := d.newDriver(t, s, sqllock.Options{})
		c, _ := d.newDriver(t, s, sqllock.Options{})
		ctx := ctxFor(t, time.Minute)
		key := uniqueKey("paused")
		const ttl = time.Second // the session's idle timeout: 1 s
		ga, err := a.TryAcquire(ctx, backend.Request{Key: key, Owner: "owner-paused-a-0123456789", TTL: ttl})
		if err != nil {
			t.Fatalf("a: %v", err)
		}
		// b's grant pauses until c has taken the key: the server must
		// have ended b's session (idle past its timeout) meanwhile.
		var gc backend.Grant
		cTook := make(chan error, 1)
		sqllock.SetAfterGrantHook(func() {
			for {
				g, err := c.TryAcquire(ctx, backend.Request{Key: key, Owner: "owner-paused-c-0123456789", TTL: 5 * time.Second})
				if err == nil {
					gc = g
					cTook <- nil
					return
				}
				if !errors.Is(err, backend.ErrNotAcquired) || ctx.Err() != nil {
					cTook <- err
					return
				}
				select {
				case <-ctx.Done():
				case <-time.After(50 * time.Millisecond): // the server's idle timeout: no event to wait on
				}
			}
		})
		t.Cleanup(func() { sqllock.SetAfterGrantHook(nil) })
		got := make(chan error, 1)
		go func() {
			g, err := b.Wait(ctx, backend.Request{Key: key, Owner: "owner-paused-b-0123456789", TTL: ttl})
			if err == nil {
				_ = g.Lock.Release(context.Background())
				err = fmt.Errorf("granted a lease with token %d", g.Token)
			}
			got <- err
		}()
		untilSessionWaiting[error](ctx, t, a, key, nil) // got is read below
		if err := ga.Lock.Release(ctx); err != nil {
			t.Fatalf("a's release: %v", err)
		}
		if err := <-cTook; err != nil {
			t.Fatalf("c never took the key b was paused on: %v", err)
		}
		defer gc.Lock.Release(context.Background())
		if err := <-got; err == nil || strings.Contains(err.Error(), "granted a lease") {
			t.Fatalf("b, paused past its session's end after its grant while c took the key: %v, want no lease", err)
		}
	})
}
