package sqllock_test

import (
	"context"
	"errors"
	"net"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/stdlib"

	"github.com/distlock/distlock/backend"
	"github.com/distlock/distlock/sandbox"
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
// waiting FOR UPDATE on the same row.
func TestRWWriterFirst(t *testing.T) {
	s := startServer(t)
	rwWriterFirst(t, func() *sqllock.Driver { d, _ := newDriver(t, s, sqllock.Options{}); return d })
}

// TestPostgresRWWriterFirst: PostgreSQL queues a shared advisory lock
// request behind a waiting exclusive one, in both modes.
func TestPostgresRWWriterFirst(t *testing.T) {
	s := startPG(t)
	bothPGModes(t, func(t *testing.T, advisory bool) {
		rwWriterFirst(t, func() *sqllock.Driver {
			d, _ := newPGDriver(t, s, sqllock.Options{Advisory: advisory})
			return d
		})
	})
}

// rwPairs runs pairs uncontended TryAcquireRW+Release of the mode side
// after a warm-up (row creation, spare, cached statements) and returns
// how many of each command kind were sent per pair, by snapshot.
func rwPairs(t *testing.T, d *sqllock.Driver, mode backend.Kind, snapshot func() map[byte]int, kinds ...byte) map[byte]float64 {
	t.Helper()
	const pairs = 20
	key := uniqueKey("rw-roundtrips")
	pair := func(i int) {
		ctx := ctxFor(t, 10*time.Second)
		g, err := d.TryAcquire(ctx, kindReq(rwReq(key, "rw-owner"), mode, false))
		if err != nil {
			t.Fatalf("%v pair %d: %v", mode, i, err)
		}
		if err := g.Lock.Release(ctx); err != nil {
			t.Fatalf("%v pair %d: release: %v", mode, i, err)
		}
	}
	for i := range 4 {
		pair(i)
	}
	before := snapshot()
	for i := range pairs {
		pair(i)
	}
	after := snapshot()
	out := map[byte]float64{}
	for _, k := range kinds {
		out[k] = float64(after[k]-before[k]) / pairs
	}
	return out
}

// TestRWRoundTrips: per uncontended TryAcquireRW+Release in steady state,
// the commands sent, counted on the wire. A reader: the locking read,
// the read of the last write's token, COMMIT; with multiStatements the
// first two are one batch. A writer: the locking read, the committed
// token increment (another connection), a ping of the pinned session
// (still holding after the commit), COMMIT.
func TestRWRoundTrips(t *testing.T) {
	s := startServer(t)
	for _, tc := range []struct {
		name        string
		params      string
		read, write map[byte]float64
	}{
		{"default pool", "", map[byte]float64{comQuery: 3}, map[byte]float64{comQuery: 3, comPing: 1}},
		{"multiStatements", "&multiStatements=true", map[byte]float64{comQuery: 2}, map[byte]float64{comQuery: 3, comPing: 1}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			db, cc := openCounted(t, s, tc.params)
			d, err := sqllock.New(ctxFor(t, 30*time.Second), db, &sqllock.Options{Table: testTable})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = d.Close() })
			for mode, want := range map[backend.Kind]map[byte]float64{backend.Read: tc.read, backend.Write: tc.write} {
				got := rwPairs(t, d, mode, cc.snapshot, comQuery, comPing, comStmtPrepare, comStmtExecute)
				for _, k := range []byte{comQuery, comPing, comStmtPrepare, comStmtExecute} {
					if got[k] != want[k] {
						t.Errorf("%v: commands per pair %v, want %v", mode, got, want)
						break
					}
				}
				t.Logf("%v: commands per pair %v", mode, got)
			}
		})
	}
}

// TestPostgresRWRoundTrips: per uncontended TryAcquireRW+Release, a
// reader sends two round trips (the batch that opens the transaction,
// takes the shared advisory lock and reads the last write's token;
// ROLLBACK), a writer three (the batch; the committed token increment on
// another connection, which checks that the holding transaction is in
// progress; ROLLBACK).
func TestPostgresRWRoundTrips(t *testing.T) {
	s := startPG(t)
	cfg, err := pgx.ParseConfig(sandbox.PostgresURL(s.addr()))
	if err != nil {
		t.Fatal(err)
	}
	pc := &pgCounter{n: map[byte]int{}}
	cfg.DialFunc = func(ctx context.Context, network, addr string) (net.Conn, error) {
		var d net.Dialer
		c, err := d.DialContext(ctx, network, addr)
		if err != nil {
			return nil, err
		}
		return &pgCountConn{Conn: c, pc: pc}, nil
	}
	db := stdlib.OpenDB(*cfg)
	t.Cleanup(func() { _ = db.Close() })
	d, err := sqllock.New(ctxFor(t, 30*time.Second), db, &sqllock.Options{Table: testTable})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = d.Close() })
	for mode, want := range map[backend.Kind]float64{backend.Read: 2, backend.Write: 3} {
		got := rwPairs(t, d, mode, pc.snapshot, 'Q', 'S')
		if rt := got['Q'] + got['S']; rt != want {
			t.Errorf("%v: %v round trips per pair (Query %v, Sync %v), want %v", mode, rt, got['Q'], got['S'], want)
		}
		t.Logf("%v: round trips per pair: Query %v, Sync %v", mode, got['Q'], got['S'])
	}
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

// TestRWTokensAcrossRestart: MySQL/MariaDB, a clean restart.
func TestRWTokensAcrossRestart(t *testing.T) {
	s := startServer(t)
	rwTokensAcrossRestart(t, func() *sqllock.Driver { d, _ := newDriver(t, s, sqllock.Options{}); return d },
		func(ctx context.Context) error {
			if err := s.g.Node(0).Stop(ctx); err != nil {
				return err
			}
			return s.g.Node(0).Start(ctx)
		})
}

// TestPostgresRWTokensAcrossCrash: PostgreSQL, a crash (SIGKILL of every
// process) and crash recovery.
func TestPostgresRWTokensAcrossCrash(t *testing.T) {
	s := startPG(t)
	rwTokensAcrossRestart(t, func() *sqllock.Driver { d, _ := newPGDriver(t, s, sqllock.Options{}); return d },
		func(ctx context.Context) error {
			if err := s.g.Node(0).Kill(ctx); err != nil {
				return err
			}
			return s.g.Node(0).Start(ctx)
		})
}
