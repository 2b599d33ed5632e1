package sqllock_test

import (
	"context"
	"database/sql"
	"encoding/binary"
	"errors"
	"net"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/distlock/distlock"
	"github.com/distlock/distlock/backend"
	"github.com/distlock/distlock/sandbox"
	"github.com/distlock/distlock/sqllock"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/jackc/pgx/v5/stdlib"
)

// pgCounter counts the messages PostgreSQL clients send, by type byte,
// on connections dialled through it.
type pgCounter struct {
	mu sync.Mutex
	n  map[byte]int
}

func (pc *pgCounter) snapshot() map[byte]int {
	pc.mu.Lock()
	defer pc.mu.Unlock()
	out := map[byte]int{}
	for k, v := range pc.n {
		out[k] = v
	}
	return out
}

// pgCountConn follows the client→server stream message by message: the
// start-up message (a 4-byte length, no type), then a type byte and a
// 4-byte length that counts itself.
type pgCountConn struct {
	net.Conn
	pc      *pgCounter
	started bool
	hdr     [5]byte
	nhdr    int
	remain  int
}

func (c *pgCountConn) Write(b []byte) (int, error) {
	for p := b; len(p) > 0; {
		if c.remain > 0 {
			k := min(c.remain, len(p))
			c.remain -= k
			p = p[k:]
			continue
		}
		want := 5
		if !c.started {
			want = 4
		}
		k := copy(c.hdr[c.nhdr:want], p)
		c.nhdr += k
		p = p[k:]
		if c.nhdr < want {
			continue
		}
		if !c.started {
			c.started = true
			c.remain = int(binary.BigEndian.Uint32(c.hdr[:4])) - 4
		} else {
			c.pc.mu.Lock()
			c.pc.n[c.hdr[0]]++
			c.pc.mu.Unlock()
			c.remain = int(binary.BigEndian.Uint32(c.hdr[1:5])) - 4
		}
		c.nhdr = 0
	}
	return c.Conn.Write(b)
}

// TestPostgresRoundTrips: per uncontended acquire+release in steady state,
// the messages a Driver sends, counted on the wire: three round trips per
// acquire+release, two simple queries (BEGIN, the session's idle timeout
// and the locking read as one batch; ROLLBACK) and the fencing counter's
// increment on another connection as Bind, Execute, Sync of a statement
// pgx prepared once per connection (no Parse after the first use), and no
// statement prepared per key, neither on a key's first use nor by
// Inspect.
func TestPostgresRoundTrips(t *testing.T) {
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
	if name := d.Capabilities().Name; name != "postgres" {
		t.Fatalf("Capabilities().Name = %q over a pgx *sql.DB", name)
	}
	const pairs = 20
	req := backend.Request{Key: uniqueKey("pg-roundtrips"), Owner: "roundtrips-owner", TTL: 30 * time.Second}
	pair := func(wait bool) error {
		ctx := ctxFor(t, 10*time.Second)
		acq := d.TryAcquire
		if wait {
			acq = d.Wait
		}
		g, err := acq(ctx, req)
		if err != nil {
			return err
		}
		return g.Lock.Release(ctx)
	}
	for _, wait := range []bool{false, true, false, true} { // the row, then spares
		if err := pair(wait); err != nil {
			t.Fatal(err)
		}
	}
	for _, wait := range []bool{false, true} {
		before := pc.snapshot()
		for range pairs {
			if err := pair(wait); err != nil {
				t.Fatal(err)
			}
		}
		after := pc.snapshot()
		// Three round trips: the locking batch and the release as simple
		// queries, the fencing counter (on the grant's path) as Bind,
		// Execute and Sync of the statement prepared once per connection:
		// no Parse once the connections have run it.
		want := map[byte]int{'Q': 2, 'B': 1, 'E': 1, 'S': 1}
		for _, m := range []byte{'Q', 'P', 'B', 'E', 'S'} {
			if got := after[m] - before[m]; got != want[m]*pairs {
				t.Errorf("wait=%v: %d pairs sent %d messages %q, want %d (before %v, after %v)", wait, pairs, got, m, want[m]*pairs, before, after)
			}
		}
	}
	// First use of keys (the row created), Inspect: still nothing
	// prepared (pgx would prepare and cache a statement per key for
	// database/sql's QueryRow).
	before := pc.snapshot()
	for range 5 {
		key := uniqueKey("pg-roundtrips-new")
		g, err := d.TryAcquire(ctxFor(t, 10*time.Second), backend.Request{Key: key, Owner: "o", TTL: 30 * time.Second})
		if err != nil {
			t.Fatal(err)
		}
		if info, err := d.Inspect(ctxFor(t, 10*time.Second), key, backend.Exclusive); err != nil || !info.Held {
			t.Fatalf("Inspect of a held key: %+v, %v", info, err)
		}
		if err := g.Lock.Release(ctxFor(t, 10*time.Second)); err != nil {
			t.Fatal(err)
		}
		if info, err := d.Inspect(ctxFor(t, 10*time.Second), key, backend.Exclusive); err != nil || info.Held {
			t.Fatalf("Inspect of a released key: %+v, %v", info, err)
		}
	}
	after := pc.snapshot()
	if p := after['P'] - before['P']; p != 0 {
		t.Errorf("new keys and Inspect sent %d Parse messages, want none (before %v, after %v)", p, before, after)
	}
}

// TestPostgresWaitCancel: a Wait whose ctx ends is interrupted in the
// server (pg_cancel_backend) on a session that stays open, not by closing
// its connection; no session is left waiting in the server's lock queue,
// and the lock goes to the next taker as soon as its holder releases it.
func TestPostgresWaitCancel(t *testing.T) {
	s := startPG(t)
	d, _ := newPGDriver(t, s, sqllock.Options{})
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

// TestPostgresURL: postgres:// and postgresql:// open a Driver; bad
// parameters are named; a wrong password fails without showing it.
func TestPostgresURL(t *testing.T) {
	s := startPG(t)
	for _, scheme := range []string{"postgres", "postgresql"} {
		u := strings.Replace(sandbox.PostgresURL(s.addr()), "postgres://", scheme+"://", 1) + "&table=" + testTable + "&lock_wait_timeout=2s"
		l, err := distlock.Open(ctxFor(t, 30*time.Second), u, distlock.WithDefaultTTL(5*time.Second))
		if err != nil {
			t.Fatalf("Open(%s://): %v", scheme, err)
		}
		le, err := l.Acquire(ctxFor(t, 10*time.Second), uniqueKey("pg-url"))
		if err != nil {
			t.Fatalf("%s: Acquire: %v", scheme, err)
		}
		release(t, le)
		if err := l.Close(); err != nil {
			t.Fatal(err)
		}
	}
	base := sandbox.PostgresURL(s.addr())
	for _, tc := range []struct{ url, want string }{
		{base + "&sslmode=sometimes", "sslmode"},
		{base + "&table=no-dash", "table"},
		{base + "&colour=blue", "colour"},
		{base + "&sslcert=/tmp/x.pem", "sslkey"},
		{strings.Replace(base, "/"+sandbox.Database, "/", 1), "DBNAME"},
	} {
		_, err := distlock.Open(ctxFor(t, 10*time.Second), tc.url)
		if !errors.Is(err, backend.ErrInvalidConfig) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("Open(%s): %v, want ErrInvalidConfig naming %q", tc.url, err, tc.want)
		}
	}
	const bad = "Wr0ng-pw-4e1c"
	wrong := strings.Replace(base, ":"+sandbox.PostgresPassword+"@", ":"+bad+"@", 1)
	_, err := distlock.Open(ctxFor(t, 10*time.Second), wrong)
	if err == nil || !strings.Contains(err.Error(), "password authentication failed") {
		t.Errorf("a wrong password: %v, want the server's refusal", err)
	}
	if err != nil && strings.Contains(err.Error(), bad) {
		t.Errorf("the error shows the password: %v", err)
	}
}

// TestPostgresTLS: against a PostgreSQL that accepts only TLS and a
// password, the URL's sslmode=verify-full and sslrootcert verify the
// server, sslcert and sslkey present a client certificate (the lock's
// session shows it in pg_stat_ssl); another CA, or no TLS, is refused.
func TestPostgresTLS(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), sandbox.DefaultStartTimeout+time.Minute)
	defer cancel()
	g, err := sandbox.Start(ctx, sandbox.Spec{Kind: sandbox.Postgres, TLS: true, Logf: func(string, ...any) {}})
	if err != nil {
		setting, serr := sandbox.ProviderSetting(sandbox.Spec{Kind: sandbox.Postgres})
		if serr == nil && setting == sandbox.ProviderAuto && errors.Is(err, sandbox.ErrUnavailable) {
			t.Skipf("no PostgreSQL here: %v", err)
		}
		t.Fatalf("starting PostgreSQL with TLS: %v", err)
	}
	t.Cleanup(func() { _ = g.Close() })
	files, _ := g.TLSFiles()
	withCert := g.URL() + "&" + url.Values{"sslcert": {files.ClientCert}, "sslkey": {files.ClientKey}, "table": {testTable}}.Encode()
	l, err := distlock.Open(ctx, withCert, distlock.WithDefaultTTL(5*time.Second))
	if err != nil {
		t.Fatalf("Open with TLS and a client certificate: %v", err)
	}
	defer l.Close()
	key := uniqueKey("pg-tls")
	le, err := l.Acquire(ctx, key)
	if err != nil {
		t.Fatalf("Acquire over TLS: %v", err)
	}
	admin, err := pgx.Connect(ctx, g.URL())
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close(context.Background())
	var ssl bool
	var dn *string
	err = admin.QueryRow(ctx, `SELECT s.ssl, s.client_dn FROM pg_stat_ssl s JOIN "`+testTable+sqllock.FenceSuffix+`" f ON s.pid = f.holder_id WHERE f.name = $1`, []byte(key)).Scan(&ssl, &dn)
	if err != nil {
		t.Fatalf("the holder's session in pg_stat_ssl: %v", err)
	}
	if !ssl || dn == nil || !strings.Contains(*dn, "distlock sandbox client") {
		t.Errorf("the lock's session: ssl=%v client_dn=%v, want TLS with the sandbox's client certificate", ssl, dn)
	}
	release(t, le)

	other, err := sandbox.WriteCerts(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct{ what, url, want string }{
		{"plaintext", sandbox.PostgresURL(g.Node(0).Addr()), "no encryption"},
		{"the server checked against another CA", sandbox.PostgresTLSURL(g.Node(0).Addr(), other.CA), "certificate"},
	} {
		_, err := distlock.Open(ctx, tc.url)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want an error containing %q", tc.what, err, tc.want)
		}
		if err != nil && strings.Contains(err.Error(), sandbox.PostgresPassword+"@") {
			t.Errorf("%s: the error shows the password: %v", tc.what, err)
		}
	}
}

// TestPostgresNewPool: a Driver over a *pgxpool.Pool locks, excludes, and
// leaves the pool open and whole when it closes.
func TestPostgresNewPool(t *testing.T) {
	s := startPG(t)
	ctx := ctxFor(t, 30*time.Second)
	pool, err := pgxpool.New(ctx, sandbox.PostgresURL(s.addr())+"&pool_max_conns=6")
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	d, err := sqllock.NewPool(ctx, pool, &sqllock.Options{Table: testTable})
	if err != nil {
		t.Fatal(err)
	}
	key := uniqueKey("pg-pool")
	g, err := d.TryAcquire(ctx, backend.Request{Key: key, Owner: "a", TTL: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := d.TryAcquire(ctx, backend.Request{Key: key, Owner: "b", TTL: 5 * time.Second}); !errors.Is(err, backend.ErrNotAcquired) {
		t.Fatalf("second TryAcquire: %v, want ErrNotAcquired", err)
	}
	if err := g.Lock.Release(ctx); err != nil {
		t.Fatal(err)
	}
	for range 10 { // more pairs than the pool has connections: none is kept
		g, err := d.TryAcquire(ctx, backend.Request{Key: key, Owner: "c", TTL: 5 * time.Second})
		if err != nil {
			t.Fatal(err)
		}
		if err := g.Lock.Release(ctx); err != nil {
			t.Fatal(err)
		}
	}
	if err := d.Close(); err != nil {
		t.Fatal(err)
	}
	var one int
	if err := pool.QueryRow(ctx, "SELECT 1").Scan(&one); err != nil {
		t.Fatalf("the pool after the Driver closed: %v", err)
	}
	if _, err := sqllock.NewPool(ctx, nil, nil); !errors.Is(err, backend.ErrInvalidConfig) {
		t.Errorf("NewPool(nil): %v", err)
	}
}

// TestPostgresAdvisoryMode: with mode=advisory a held key is an advisory
// lock in pg_locks and no row of the lock table; a bare
// pg_try_advisory_xact_lock elsewhere on another key is not disturbed;
// mode= takes row or advisory only, and Advisory over MySQL is refused.
func TestPostgresAdvisoryMode(t *testing.T) {
	s := startPG(t)
	table := "distlock_test_advisory"
	u := sandbox.PostgresURL(s.addr()) + "&mode=advisory&table=" + table
	l, err := distlock.Open(ctxFor(t, 30*time.Second), u, distlock.WithDefaultTTL(5*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	key := uniqueKey("pg-advisory")
	le, err := l.Acquire(ctxFor(t, 10*time.Second), key)
	if err != nil {
		t.Fatal(err)
	}
	var advisory, tables int
	if err := s.admin.QueryRowContext(ctxFor(t, 10*time.Second),
		"SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND granted").Scan(&advisory); err != nil {
		t.Fatal(err)
	}
	if advisory != 1 {
		t.Errorf("%d advisory locks granted while one key is held, want 1", advisory)
	}
	if err := s.admin.QueryRowContext(ctxFor(t, 10*time.Second),
		"SELECT count(*) FROM pg_tables WHERE tablename = $1", table).Scan(&tables); err != nil {
		t.Fatal(err)
	}
	if tables != 0 {
		t.Errorf("advisory mode created the lock table %s", table)
	}
	if _, err := l.TryAcquire(ctxFor(t, 10*time.Second), key); !errors.Is(err, distlock.ErrNotAcquired) {
		t.Errorf("TryAcquire of a held key: %v, want ErrNotAcquired", err)
	}
	release(t, le)
	if _, err := distlock.Open(ctxFor(t, 10*time.Second), sandbox.PostgresURL(s.addr())+"&mode=gentle"); !errors.Is(err, backend.ErrInvalidConfig) || !strings.Contains(err.Error(), "mode") {
		t.Errorf("mode=gentle: %v, want ErrInvalidConfig naming mode", err)
	}
}

// TestAdvisoryNeedsPostgres: Options.Advisory over a MySQL *sql.DB is a
// configuration error (no connection is made).
func TestAdvisoryNeedsPostgres(t *testing.T) {
	db, err := sql.Open("mysql", "u:p@tcp(127.0.0.1:1)/db")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	_, err = sqllock.New(ctxFor(t, 5*time.Second), db, &sqllock.Options{Advisory: true})
	if !errors.Is(err, backend.ErrInvalidConfig) || !strings.Contains(err.Error(), "Advisory") {
		t.Errorf("Advisory over MySQL: %v, want ErrInvalidConfig naming Advisory", err)
	}
}
