package sqllock_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/distlock/distlock/backend"
	"github.com/distlock/distlock/sqllock"
)

func rwReq(key, owner string) backend.Request {
	return backend.Request{Key: key, Owner: owner, TTL: 30 * time.Second}
}

// kindReq is req for the side kind of a read-write lock.
func kindReq(req backend.Request, kind backend.Kind, waiting bool) backend.Request {
	req.Kind, req.Waiting = kind, waiting
	return req
}

// permitsReq is req for permits of a semaphore of limit.
func permitsReq(req backend.Request, limit, permits int) backend.Request {
	req.Kind, req.Limit, req.Permits = backend.Permits, limit, permits
	return req
}

// rwGrant is the outcome of a wait for one side.
type rwGrant struct {
	g   backend.Grant
	err error
}

// waitSide waits for the mode side of key in a goroutine.
func waitSide(t *testing.T, d *sqllock.Driver, key, owner string, mode backend.Kind) <-chan rwGrant {
	ch := make(chan rwGrant, 1)
	ctx := ctxFor(t, 30*time.Second)
	go func() {
		g, err := d.Wait(ctx, kindReq(rwReq(key, owner), mode, false))
		ch <- rwGrant{g, err}
	}()
	return ch
}

func releaseGrant(t *testing.T, g backend.Grant) {
	t.Helper()
	if err := g.Lock.Release(ctxFor(t, 10*time.Second)); err != nil {
		t.Errorf("Release: %v", err)
	}
}

func receive(t *testing.T, ch <-chan rwGrant, what string) backend.Grant {
	t.Helper()
	select {
	case r := <-ch:
		if r.err != nil {
			t.Fatalf("%s: %v", what, r.err)
		}
		return r.g
	case <-time.After(15 * time.Second):
		t.Fatalf("%s: no grant within 15s", what)
	}
	return backend.Grant{}
}

// rwWriterFirst checks the server's queue itself, through the driver: a
// writer waiting behind a reader keeps new readers out (their tries fail,
// their waits queue behind it), is granted when that reader releases, and
// the reader that queued after it gets in only once the writer released,
// with the writer's token.
func rwWriterFirst(t *testing.T, newDriver func() *sqllock.Driver) {
	key := uniqueKey("rw-writer-first")
	a, w, c := newDriver(), newDriver(), newDriver()
	if rw := a.Capabilities().RW; rw != backend.WaitQueue {
		t.Errorf("Capabilities().RW = %q, want %q", rw, backend.WaitQueue)
	}
	ra, err := a.TryAcquire(ctxFor(t, 10*time.Second), kindReq(rwReq(key, "a"), backend.Read, false))
	if err != nil {
		t.Fatalf("the first reader: %v", err)
	}
	wch := waitSide(t, w, key, "w", backend.Write)
	queued := false
	for deadline := time.Now().Add(10 * time.Second); !queued && time.Now().Before(deadline); {
		g, err := c.TryAcquire(ctxFor(t, 10*time.Second), kindReq(rwReq(key, "c"), backend.Read, false))
		switch {
		case err == nil:
			releaseGrant(t, g)
			time.Sleep(20 * time.Millisecond)
		case errors.Is(err, backend.ErrNotAcquired):
			queued = true
		default:
			t.Fatalf("a new reader's try: %v", err)
		}
	}
	if !queued {
		t.Fatal("new readers were still granted 10s after a writer began to wait")
	}
	rch := waitSide(t, c, key, "c", backend.Read)
	time.Sleep(200 * time.Millisecond)
	select {
	case r := <-rch:
		t.Fatalf("a reader that came after a waiting writer was granted before it (%v)", r.err)
	default:
	}
	releaseGrant(t, ra)
	gw := receive(t, wch, "the waiting writer")
	select {
	case r := <-rch:
		t.Fatalf("a reader was granted while the writer held the lock (%v)", r.err)
	case <-time.After(300 * time.Millisecond):
	}
	releaseGrant(t, gw)
	gr := receive(t, rch, "the reader queued after the writer")
	if gr.Token != gw.Token || gw.Token == 0 {
		t.Errorf("the reader's token %d, want the writer's %d (not 0)", gr.Token, gw.Token)
	}
	releaseGrant(t, gr)
}

// TestRWWriterFirst: MariaDB queues a LOCK IN SHARE MODE request behind a
// waiting FOR UPDATE on the same row; PostgreSQL a shared advisory lock
// request behind a waiting exclusive one, in both modes.
func TestRWWriterFirst(t *testing.T) {
	eachDialect(t, mysqlProc|allPG, func(t *testing.T, d *dialect) {
		s := d.server(t)
		rwWriterFirst(t, func() *sqllock.Driver { dr, _ := d.newDriver(t, s, sqllock.Options{}); return dr })
	})
}

// rwPairs runs uncontended TryAcquireRW+Release of the mode side in
// steady state (steadyPairs) and returns what was sent per pair.
func rwPairs(t *testing.T, d *sqllock.Driver, mode backend.Kind, wc *wireCounter, kinds []byte) map[byte]float64 {
	t.Helper()
	key := uniqueKey("rw-roundtrips")
	return steadyPairs(wc, kinds, func(i int) {
		ctx := ctxFor(t, 10*time.Second)
		g, err := d.TryAcquire(ctx, kindReq(rwReq(key, "rw-owner"), mode, false))
		if err != nil {
			t.Fatalf("%v pair %d: %v", mode, i, err)
		}
		if err := g.Lock.Release(ctx); err != nil {
			t.Fatalf("%v pair %d: release: %v", mode, i, err)
		}
	})
}

// TestRWRoundTrips: per uncontended TryAcquireRW+Release in steady state,
// what is sent, counted on the wire. MySQL, a reader: the locking read,
// the read of the last write's token, COMMIT; with multiStatements the
// first two are one batch. A writer: the locking read, the committed
// token increment (another connection), a ping of the pinned session
// (still holding after the commit), COMMIT. PostgreSQL, a reader: two
// round trips (the batch that opens the transaction, takes the shared
// advisory lock and reads the last write's token; ROLLBACK); a writer
// three (the batch; the committed token increment on another connection,
// which checks that the holding transaction is in progress, as Bind,
// Execute and Sync; ROLLBACK).
func TestRWRoundTrips(t *testing.T) {
	want := map[rowSet]map[backend.Kind]map[byte]float64{
		mysqlProc:    {backend.Read: {comQuery: 3}, backend.Write: {comQuery: 3, comPing: 1}},
		mysqlBatched: {backend.Read: {comQuery: 2}, backend.Write: {comQuery: 3, comPing: 1}},
		pgRow:        {backend.Read: {'Q': 2}, backend.Write: {'Q': 2, 'B': 1, 'E': 1, 'S': 1}},
	}
	eachDialect(t, mysqlProc|mysqlBatched|pgRow, func(t *testing.T, d *dialect) {
		dr, wc := d.countedDriver(t, d.server(t), "")
		for mode, want := range want[d.id] {
			got := rwPairs(t, dr, mode, wc, d.wireKinds())
			if !sameCounts(got, want, d.wireKinds()) {
				t.Errorf("%v: sent per pair %v, want %v", mode, got, want)
			}
			t.Logf("%v: sent per pair %v", mode, got)
		}
	})
}

// rwTokensAcrossRestart: a write's token is durable: after restart (the
// server stopped or killed, and started), a reader reports it and the next
// writer's token is above it.
func rwTokensAcrossRestart(t *testing.T, d func() *sqllock.Driver, restart func(ctx context.Context) error) {
	key := uniqueKey("rw-restart")
	before := d()
	var last uint64
	for i := range 2 {
		g, err := before.TryAcquire(ctxFor(t, 10*time.Second), kindReq(rwReq(key, "w"), backend.Write, false))
		if err != nil {
			t.Fatalf("write %d: %v", i, err)
		}
		if g.Token <= last {
			t.Errorf("write %d: token %d, not above %d", i, g.Token, last)
		}
		last = g.Token
		releaseGrant(t, g)
	}
	if err := restart(ctxFor(t, 3*time.Minute)); err != nil {
		t.Fatal(err)
	}
	after := d()
	r, err := after.Wait(ctxFor(t, 30*time.Second), kindReq(rwReq(key, "r"), backend.Read, false))
	if err != nil {
		t.Fatalf("read after the restart: %v", err)
	}
	if r.Token != last {
		t.Errorf("read after the restart: token %d, want the last write's %d", r.Token, last)
	}
	releaseGrant(t, r)
	w, err := after.Wait(ctxFor(t, 30*time.Second), kindReq(rwReq(key, "w2"), backend.Write, false))
	if err != nil {
		t.Fatalf("write after the restart: %v", err)
	}
	if w.Token <= last {
		t.Errorf("write after the restart: token %d, not above %d before it", w.Token, last)
	}
	releaseGrant(t, w)
}

// TestRWTokensAcrossRestart: a write's token is durable across the
// restart that loses the live counters: MySQL/MariaDB's clean restart,
// PostgreSQL's crash (SIGKILL of every process) and crash recovery.
func TestRWTokensAcrossRestart(t *testing.T) {
	eachDialect(t, mysqlProc|pgRow, func(t *testing.T, d *dialect) {
		s := d.server(t)
		restart := s.restart
		if d.restartKeepsLive {
			restart = s.crash
		}
		rwTokensAcrossRestart(t, func() *sqllock.Driver { dr, _ := d.newDriver(t, s, sqllock.Options{}); return dr }, restart)
	})
}
