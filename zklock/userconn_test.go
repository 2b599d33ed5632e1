package zklock

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/distlock/distlock"
	"github.com/distlock/distlock/backend"
)

// userSession is the session timeout of the user-made connections below:
// long enough that go-zookeeper's receive timeout (2/3 of it) cannot pass
// before the test has looked, on a busy machine.
const userSession = 12 * time.Second

// TestUserConnCloseDuringStall: Close of a driver over a user's
// connection does not wait for a go-zookeeper call still out on that
// connection. go-zookeeper's calls take no ctx: do gives up on them at
// its ctx, and they return only when go-zookeeper does (its receive
// timeout, 2/3 of the session timeout, for a request sent; a reconnect's
// handshake, up to ten times that, for one still queued). The driver
// cannot close a connection it does not own to cut that short.
func TestUserConnCloseDuringStall(t *testing.T) {
	c := startCluster(t, 1)
	h := newHarness(c)
	t.Cleanup(func() { _ = h.Close() })
	d, conn, err := c.newUserDriver(context.Background(), userSession, &Options{SessionTimeout: userSession})
	if conn != nil {
		h.users = append(h.users, conn)
	}
	if err != nil {
		t.Fatal(err)
	}
	g, err := d.TryAcquire(context.Background(), backend.Request{Key: "stall-close", Owner: "o", TTL: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	if err := h.Partition(context.Background(), d); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	if err := g.Lock.Refresh(ctx, time.Second); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Refresh over a stalled path = %v, want its ctx's deadline", err)
	}
	// The Sync is out, unanswered: go-zookeeper returns it when its
	// receive timeout ends the connection (the state leaves HasSession
	// first).
	start := time.Now()
	if err := d.Close(); err != nil {
		t.Fatal(err)
	}
	took := time.Since(start)
	if s := conn.State(); s != zk.StateHasSession {
		t.Fatalf("Close returned after %v, when go-zookeeper had given up the connection (state %v): it waited for the call it had abandoned", took, s)
	}
	t.Logf("Close took %v with a call out", took)
	_ = h.Heal(context.Background(), d)
}

// records is a slog.Handler keeping the records it gets.
type records struct {
	mu   sync.Mutex
	recs []slog.Record
}

func (r *records) Enabled(context.Context, slog.Level) bool { return true }
func (r *records) Handle(_ context.Context, rec slog.Record) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.recs = append(r.recs, rec)
	return nil
}
func (r *records) WithAttrs([]slog.Attr) slog.Handler { return r }
func (r *records) WithGroup(string) slog.Handler      { return r }

// warnings returns the messages of the WARN records.
func (r *records) warnings() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	var ws []string
	for _, rec := range r.recs {
		if rec.Level == slog.LevelWarn {
			ws = append(ws, rec.Message)
		}
	}
	return ws
}

type quietZK struct{}

func (quietZK) Printf(string, ...any) {}

// TestNewWarnsLongSession: a session timeout that a server with default
// settings would cut (above 40 s) is logged as a warning through the
// Locker's logger, since the driver cannot learn the granted timeout of a
// connection passed to New; one it grants is not.
func TestNewWarnsLongSession(t *testing.T) {
	for _, tc := range []struct {
		session time.Duration
		warn    bool
	}{{10 * time.Second, false}, {40 * time.Second, false}, {time.Minute, true}} {
		conn, _, err := zk.Connect([]string{"127.0.0.1:1"}, tc.session, zk.WithLogger(quietZK{}))
		if err != nil {
			t.Fatal(err)
		}
		d, err := New(conn, &Options{SessionTimeout: tc.session})
		if err != nil {
			conn.Close()
			t.Fatal(err)
		}
		rec := &records{}
		l := distlock.New(d, distlock.WithLogger(slog.New(rec)))
		_ = l.Close()
		conn.Close()
		ws := rec.warnings()
		switch {
		case tc.warn && (len(ws) != 1 || !strings.Contains(ws[0], "maxSessionTimeout")):
			t.Errorf("SessionTimeout %v: warnings %q, want one about the server's maxSessionTimeout", tc.session, ws)
		case !tc.warn && len(ws) > 0:
			t.Errorf("SessionTimeout %v: warnings %q, want none", tc.session, ws)
		}
	}
}

// TestUserConnGrantBeforeExpirySeen: on a user's connection the driver
// learns that the session expired by polling (pollState), so a lock can
// be granted in the next session before the poll sees the change. Its
// node is not gone with the expired session: the lock's Release deletes
// it. Before, every lock the driver held was marked gone, the new one
// too, and its Release, believing the node gone with its session, left it
// in place: its key stayed locked for as long as the new session lived (the
// faults suite's zk3 run, seed 433337494: no write grant for 30 s after
// a user-made client's stall).
func TestUserConnGrantBeforeExpirySeen(t *testing.T) {
	every := pollEvery
	pollEvery = func(time.Duration) time.Duration { return time.Hour } // the test plays the poller
	t.Cleanup(func() { pollEvery = every })
	c := startCluster(t, 1)
	h := newHarness(c)
	t.Cleanup(func() { _ = h.Close() })
	const session = time.Second
	d, conn, err := c.newUserDriver(ctxFor(t, 30*time.Second), session, &Options{SessionTimeout: session})
	if conn != nil {
		h.users = append(h.users, conn)
	}
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = d.Close() })
	old, fresh := uniqueKey(t)+"-old", uniqueKey(t)+"-new"
	lost := make(chan error, 1)
	req := func(key string) backend.Request {
		r := backend.Request{Key: key, Owner: "o", TTL: session}
		if key == old {
			r.OnLost = func(err error) { lost <- err }
		}
		return r
	}
	ga, err := d.TryAcquire(ctxFor(t, 10*time.Second), req(old))
	if err != nil {
		t.Fatal(err)
	}
	first := conn.SessionID()
	if err := h.Partition(context.Background(), d); err != nil {
		t.Fatal(err)
	}
	if !eventually(20*time.Second, func() bool {
		q, err := c.queue(old)
		return err == nil && len(q) == 0
	}) {
		t.Fatal("the session did not expire")
	}
	if err := h.Heal(context.Background(), d); err != nil {
		t.Fatal(err)
	}
	if !eventually(20*time.Second, func() bool {
		return conn.State() == zk.StateHasSession && conn.SessionID() != first
	}) {
		t.Fatal("no new session after the heal")
	}
	gb, err := d.TryAcquire(ctxFor(t, 10*time.Second), req(fresh))
	if err != nil {
		t.Fatal(err)
	}
	// What pollState does when it sees the new session id.
	d.sess.gen.Add(1)
	d.stateChanged(zk.StateExpired)
	select {
	case err := <-lost:
		if !errors.Is(err, backend.ErrLost) {
			t.Errorf("the expired session's lock was lost with %v, want ErrLost", err)
		}
	case <-time.After(10 * time.Second):
		t.Error("the expired session's lock was not reported lost")
	}
	if err := gb.Lock.Release(ctxFor(t, 10*time.Second)); err != nil {
		t.Errorf("Release of the lock granted in the new session: %v", err)
	}
	if q, err := c.queue(fresh); err != nil || len(q) != 0 {
		t.Errorf("after its Release, %q's queue is %v (%v): its node stayed, the key locked", fresh, q, err)
	}
	_ = ga.Lock.Release(ctxFor(t, 10*time.Second))
}
