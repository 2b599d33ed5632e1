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
	if opts.Table == "" {
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
	s        *pgServer
	advisory bool // Options.Advisory
	ttl      time.Duration
	mu       sync.Mutex
	clients  map[backend.Driver]*client
}

func newPGHarness(s *pgServer, ttl time.Duration) *pgHarness {
	return &pgHarness{s: s, ttl: ttl, clients: map[backend.Driver]*client{}}
}

func (h *pgHarness) NewDriver(ctx context.Context) (backend.Driver, error) {
	p, err := sandbox.StartProxy(h.s.addr)
	if err != nil {
		return nil, err
	}
	c := &client{db: h.s.newDB(p.Addr), p: p}
	d, err := sqllock.New(ctx, c.db, &sqllock.Options{Table: testTable, Advisory: h.advisory})
	if err != nil {
		_ = c.db.Close()
		_ = p.Close()
		return nil, err
	}
	h.mu.Lock()
	h.clients[d] = c
	h.mu.Unlock()
	return d, nil
}

func (h *pgHarness) client(d backend.Driver) (*client, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	c := h.clients[d]
	if c == nil {
		return nil, fmt.Errorf("unknown driver %T", d)
	}
	return c, nil
}

func (h *pgHarness) Partition(_ context.Context, d backend.Driver) error {
	c, err := h.client(d)
	if err != nil {
		return err
	}
	c.p.Blackhole(sandbox.Both)
	return nil
}

func (h *pgHarness) Heal(_ context.Context, d backend.Driver) error {
	c, err := h.client(d)
	if err != nil {
		return err
	}
	c.p.Heal()
	return nil
}

// DropNextReply loses the reply to d's next query (a simple-protocol
// Query message, or the first message of an extended-protocol exchange),
// not to a connection's start-up. The connection then closes, which ends
// whatever it held.
func (h *pgHarness) DropNextReply(_ context.Context, d backend.Driver) error {
	c, err := h.client(d)
	if err != nil {
		return err
	}
	c.p.DropReply(isPGQuery, nil)
	return nil
}

func (h *pgHarness) Dropped(d backend.Driver) int {
	c, err := h.client(d)
	if err != nil {
		return 0
	}
	return c.p.Dropped()
}

// isPGQuery reports whether chunk starts a PostgreSQL query message: Query
// ('Q'), Parse ('P') or Bind ('B'), each a type byte and a 4-byte length.
func isPGQuery(chunk []byte) bool {
	return len(chunk) >= 5 && (chunk[0] == 'Q' || chunk[0] == 'P' || chunk[0] == 'B')
}

func (h *pgHarness) TTL() time.Duration { return h.ttl }

func (h *pgHarness) Kill(_ context.Context, d backend.Driver) error {
	c, err := h.client(d)
	if err != nil {
		return err
	}
	return c.kill()
}

// Delete terminates the holder's session from an admin connection.
func (h *pgHarness) Delete(ctx context.Context, key string) error {
	return h.s.killHolder(ctx, key)
}

func (s *pgServer) killHolder(ctx context.Context, key string) error {
	var ok bool
	q := `SELECT pg_terminate_backend(holder_id::int) FROM "` + testTable + sqllock.FenceSuffix + `" WHERE name = $1`
	if err := s.admin.QueryRowContext(ctx, q, []byte(key)).Scan(&ok); err != nil {
		return fmt.Errorf("holder of %q: %w", key, err)
	}
	if !ok {
		return fmt.Errorf("holder of %q: no such session", key)
	}
	return nil
}

func (h *pgHarness) StopServer(ctx context.Context) error  { return h.s.g.Node(0).Stop(ctx) }
func (h *pgHarness) StartServer(ctx context.Context) error { return h.s.g.Node(0).Start(ctx) }

func (h *pgHarness) Close() error {
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, c := range h.clients {
		_ = c.db.Close()
		_ = c.p.Close()
	}
	clear(h.clients)
	return nil
}
