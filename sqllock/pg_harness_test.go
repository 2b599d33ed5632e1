package sqllock_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/distlock/distlock/backend"
	"github.com/distlock/distlock/sandbox"
	"github.com/distlock/distlock/sqllock"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/jackc/pgx/v5/stdlib"
)

// pgServer is one sandbox PostgreSQL shared by the package's PostgreSQL
// tests, started by the first that needs it and stopped by TestMain.
type pgServer struct {
	g     *sandbox.Group
	admin *sql.DB
}

var pgShared struct {
	mu  sync.Mutex
	srv *pgServer
	err error
}

// startPG returns the shared PostgreSQL, starting it on first use; as
// startServer, it skips only in auto mode when no provider can run it.
func startPG(t *testing.T) *pgServer {
	t.Helper()
	pgShared.mu.Lock()
	defer pgShared.mu.Unlock()
	if pgShared.srv == nil && pgShared.err == nil {
		spec := sandbox.Spec{Kind: sandbox.Postgres, Logf: func(string, ...any) {}}
		ctx, cancel := context.WithTimeout(context.Background(), sandbox.DefaultStartTimeout+time.Minute)
		defer cancel()
		g, err := sandbox.Start(ctx, spec)
		if err != nil {
			pgShared.err = err
		} else {
			s := &pgServer{g: g}
			s.admin = s.newDB(s.addr)
			pgShared.srv = s
		}
	}
	if pgShared.err != nil {
		setting, serr := sandbox.ProviderSetting(sandbox.Spec{Kind: sandbox.Postgres})
		if serr == nil && setting == sandbox.ProviderAuto && errors.Is(pgShared.err, sandbox.ErrUnavailable) {
			t.Skipf("no PostgreSQL here: %v", pgShared.err)
		}
		t.Fatalf("starting PostgreSQL: %v", pgShared.err)
	}
	return pgShared.srv
}

func stopPG() error {
	pgShared.mu.Lock()
	defer pgShared.mu.Unlock()
	if pgShared.srv == nil {
		return nil
	}
	_ = pgShared.srv.admin.Close()
	return pgShared.srv.g.Close()
}

func (s *pgServer) addr() string { return s.g.Node(0).Addr() }

// newDB opens a *sql.DB of pgx's stdlib whose connections dial addr().
func (s *pgServer) newDB(addr func() string) *sql.DB {
	cfg, err := pgx.ParseConfig(sandbox.PostgresURL(s.addr()))
	if err != nil {
		panic(err)
	}
	cfg.ConnectTimeout = 5 * time.Second
	cfg.DialFunc = func(ctx context.Context, _, _ string) (net.Conn, error) {
		var d net.Dialer
		return d.DialContext(ctx, "tcp", addr())
	}
	db := stdlib.OpenDB(*cfg)
	db.SetMaxIdleConns(16)
	return db
}

// newPGDriver makes a Driver over its own *sql.DB, closed when the test
// ends.
func newPGDriver(t *testing.T, s *pgServer, opts sqllock.Options) (*sqllock.Driver, *client) {
	t.Helper()
	c := &client{db: s.newDB(s.addr)}
	switch {
	case opts.Table != "":
	case opts.Advisory:
		opts.Table = testAdvisoryTable // a table is used in one mode
	default:
		opts.Table = testTable
	}
	d, err := sqllock.New(ctxFor(t, 30*time.Second), c.db, &opts)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	t.Cleanup(func() { _ = c.db.Close() })
	t.Cleanup(func() { _ = d.Close() })
	return d, c
}

// pgHarness implements conformance.Harness, Partitioner and ReplyDropper
// over the shared PostgreSQL, each Driver behind a proxy of its own.
type pgHarness struct {
	proxied
	s        *pgServer
	advisory bool // Options.Advisory, on a table of its own (the table records its mode)
}

// table is the harness's lock table: advisory mode has its own, since a
// table records the one mode it is used in.
func (h *pgHarness) table() string {
	if h.advisory {
		return testAdvisoryTable
	}
	return testTable
}

// testAdvisoryTable is the PostgreSQL tests' lock table in advisory mode.
const testAdvisoryTable = "distlock_test_adv"

func newPGHarness(s *pgServer, ttl time.Duration) *pgHarness {
	return &pgHarness{proxied: proxied{g: s.g, ttl: ttl, isCommand: isPGQuery, clients: map[backend.Driver]*client{}}, s: s}
}

func (h *pgHarness) NewDriver(ctx context.Context) (backend.Driver, error) {
	return h.newDriver(ctx, h.s.addr, h.s.newDB, &sqllock.Options{Table: h.table(), Advisory: h.advisory})
}

// NewUserDriver makes a Driver as a service does: over its own pgx pool
// (pgxpool.New with the connection string only: pgx's defaults, the pool's
// size as NewPool's doc asks) passed to NewPool, with nil Options but the harness's table
// and mode, dialing through a proxy of its own for the faults. The pool
// is closed with the harness, after the case closed the Driver.
func (h *pgHarness) NewUserDriver(ctx context.Context) (backend.Driver, error) {
	p, err := sandbox.StartProxy(h.s.addr)
	if err != nil {
		return nil, err
	}
	// pgx's defaults but the pool's size, which NewPool's doc asks users
	// to set to the locks held at once plus two: the default (4, or the
	// number of CPUs) is below what the stall case holds at once (a
	// mutex, two read-write sides, a multi-lock of two, a leadership
	// term), and an acquisition beyond it waits for a connection for its
	// fencing token until its ctx ends.
	pool, err := pgxpool.New(ctx, sandbox.PostgresURL(p.Addr())+"&pool_max_conns=16")
	if err != nil {
		_ = p.Close()
		return nil, err
	}
	d, err := sqllock.NewPool(ctx, pool, &sqllock.Options{Table: h.table(), Advisory: h.advisory})
	if err != nil {
		pool.Close()
		_ = p.Close()
		return nil, err
	}
	h.add(d, &client{p: p, closeUser: func() { closePool(pool) }})
	return d, nil
}

// closePool closes pool, which waits for its connections to be returned:
// a case that hung with a lock held (the harness closed under it) must
// not hang the harness's Close too, so that wait is bounded.
func closePool(pool *pgxpool.Pool) {
	done := make(chan struct{})
	go func() { pool.Close(); close(done) }()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
	}
}

// isPGQuery reports whether chunk starts a PostgreSQL query message: Query
// ('Q'), Parse ('P') or Bind ('B'), each a type byte and a 4-byte length.
func isPGQuery(chunk []byte) bool {
	return len(chunk) >= 5 && (chunk[0] == 'Q' || chunk[0] == 'P' || chunk[0] == 'B')
}

// Delete terminates the holder's session from an admin connection.
func (h *pgHarness) Delete(ctx context.Context, key string) error {
	return h.s.killHolderIn(ctx, h.table(), key)
}

// killHolderIn terminates the session of key's last holder in table.
func (s *pgServer) killHolderIn(ctx context.Context, table, key string) error {
	var ok bool
	q := `SELECT pg_terminate_backend(holder_id::int) FROM "` + table + sqllock.FenceSuffix + `" WHERE name = $1`
	if err := s.admin.QueryRowContext(ctx, q, []byte(key)).Scan(&ok); err != nil {
		return fmt.Errorf("holder of %q: %w", key, err)
	}
	if !ok {
		return fmt.Errorf("holder of %q: no such session", key)
	}
	return nil
}
