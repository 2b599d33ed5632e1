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
	"github.com/distlock/distlock/conformance"
	"github.com/distlock/distlock/sandbox"
	"github.com/distlock/distlock/sqllock"
	"github.com/go-sql-driver/mysql"
)

const testTable = "distlock_test_locks"

// server is one sandbox MariaDB shared by a test's cases.
type server struct {
	g     *sandbox.Group
	admin *sql.DB
}

// The package's tests share one server, started by the first test that
// needs it and stopped by TestMain.
var shared struct {
	mu  sync.Mutex
	srv *server
	err error
}

// startServer returns the shared MariaDB, starting it on first use. When no
// provider can run it, the test is skipped in auto mode and fails when a
// provider was asked for (DISTLOCK_SANDBOX=docker or local).
func startServer(t *testing.T) *server {
	t.Helper()
	shared.mu.Lock()
	defer shared.mu.Unlock()
	if shared.srv == nil && shared.err == nil {
		spec := sandbox.Spec{Kind: sandbox.MariaDB, Logf: func(string, ...any) {}}
		ctx, cancel := context.WithTimeout(context.Background(), sandbox.DefaultStartTimeout+time.Minute)
		defer cancel()
		g, err := sandbox.Start(ctx, spec)
		if err != nil {
			shared.err = err
		} else {
			s := &server{g: g}
			s.admin = s.newDB(s.addr, false)
			shared.srv = s
		}
	}
	if shared.err != nil {
		setting, serr := sandbox.ProviderSetting(sandbox.Spec{Kind: sandbox.MariaDB})
		if serr == nil && setting == sandbox.ProviderAuto && errors.Is(shared.err, sandbox.ErrUnavailable) {
			t.Skipf("no MariaDB here: %v", shared.err)
		}
		t.Fatalf("starting MariaDB: %v", shared.err)
	}
	return shared.srv
}

// stopServer stops the shared server, if one was started.
func stopServer() error {
	shared.mu.Lock()
	defer shared.mu.Unlock()
	if shared.srv == nil {
		return nil
	}
	_ = shared.srv.admin.Close()
	return shared.srv.g.Close()
}

// addr is the server's current address (a container's port changes when it
// is started again).
func (s *server) addr() string { return s.g.Node(0).Addr() }

// newDB opens a *sql.DB whose connections dial addr() (the server's
// current address, or a proxy's), asked per connection.
//
// batch turns on multiStatements, as a URL-opened Driver does, so the
// Driver sends its statements in batches; without it, one at a time.
func (s *server) newDB(addr func() string, batch bool) *sql.DB {
	cfg, err := mysql.ParseDSN(sandbox.MySQLDSN(s.addr()))
	if err != nil {
		panic(err)
	}
	cfg.InterpolateParams = true
	cfg.MultiStatements = batch
	cfg.DialFunc = func(ctx context.Context, _, _ string) (net.Conn, error) {
		var d net.Dialer
		return d.DialContext(ctx, "tcp", addr())
	}
	conn, err := mysql.NewConnector(cfg)
	if err != nil {
		panic(err)
	}
	db := sql.OpenDB(conn)
	db.SetMaxIdleConns(16)
	return db
}

// client is one Driver with its own *sql.DB, whose connections go through
// a proxy of its own (nil for clients that need no faults).
type client struct {
	db *sql.DB
	p  *sandbox.Proxy
	// closeUser closes a user-made client that is not db (a pgx pool);
	// nil: closing db closes the client.
	closeUser func()
}

// kill cuts every connection at once and refuses new ones: no rollback, no
// COM_QUIT, the server sees the connections end as for a process that
// died (with an RST).
func (c *client) kill() error {
	c.p.Refuse(true)
	c.p.Reset()
	if c.db != nil {
		_ = c.db.Close() // reports the connections just cut
	}
	return nil
}

// close closes the client's store client and its proxy.
func (c *client) close() {
	_ = c.p.Close()
	if c.closeUser != nil {
		c.closeUser()
	} else {
		_ = c.db.Close()
	}
}

// proxied is what the MySQL and PostgreSQL harnesses share: every
// Driver over a pool of its own behind a proxy to the shared server, the
// faults made through the proxies, and the server's restarts. isCommand
// tells DropNextReply which packet starts a command of the dialect.
type proxied struct {
	g         *sandbox.Group
	ttl       time.Duration
	isCommand func(chunk []byte) bool
	mu        sync.Mutex
	clients   map[backend.Driver]*client
}

// newDriver makes a Driver over newDB's pool, which dials through a new
// proxy to addr.
func (h *proxied) newDriver(ctx context.Context, addr func() string, newDB func(addr func() string) *sql.DB, opts *sqllock.Options) (backend.Driver, error) {
	p, err := sandbox.StartProxy(addr)
	if err != nil {
		return nil, err
	}
	c := &client{db: newDB(p.Addr), p: p}
	d, err := sqllock.New(ctx, c.db, opts)
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

// add records d's client, for the fault hooks and Close.
func (h *proxied) add(d backend.Driver, c *client) {
	h.mu.Lock()
	h.clients[d] = c
	h.mu.Unlock()
}

func (h *proxied) client(d backend.Driver) (*client, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	c := h.clients[d]
	if c == nil {
		return nil, fmt.Errorf("unknown driver %T", d)
	}
	return c, nil
}

// Partition black-holes d's connections, current and new.
func (h *proxied) Partition(_ context.Context, d backend.Driver) error {
	c, err := h.client(d)
	if err != nil {
		return err
	}
	c.p.Blackhole(sandbox.Both)
	return nil
}

func (h *proxied) Heal(_ context.Context, d backend.Driver) error {
	c, err := h.client(d)
	if err != nil {
		return err
	}
	c.p.Heal()
	return nil
}

// DropNextReply loses the reply to d's next command (isCommand), not to a
// connection's handshake. The connection then closes, which ends whatever
// it held.
func (h *proxied) DropNextReply(_ context.Context, d backend.Driver) error {
	c, err := h.client(d)
	if err != nil {
		return err
	}
	c.p.DropReply(h.isCommand, nil)
	return nil
}

func (h *proxied) Dropped(d backend.Driver) int {
	c, err := h.client(d)
	if err != nil {
		return 0
	}
	return c.p.Dropped()
}

func (h *proxied) TTL() time.Duration { return h.ttl }

// Kill resets every connection of d through its proxy and refuses new
// ones: no rollback, no quit message, as for a process that died.
func (h *proxied) Kill(_ context.Context, d backend.Driver) error {
	c, err := h.client(d)
	if err != nil {
		return err
	}
	return c.kill()
}

func (h *proxied) StopServer(ctx context.Context) error  { return h.g.Node(0).Stop(ctx) }
func (h *proxied) StartServer(ctx context.Context) error { return h.g.Node(0).Start(ctx) }

func (h *proxied) Close() error {
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, c := range h.clients {
		c.close()
	}
	clear(h.clients)
	return nil
}

// harness implements conformance.Harness, Partitioner and ReplyDropper
// over the shared server.
type harness struct {
	proxied
	s *server
	m mode
}

func newHarness(s *server, ttl time.Duration, m mode) *harness {
	return &harness{proxied: proxied{g: s.g, ttl: ttl, isCommand: isCommand, clients: map[backend.Driver]*client{}}, s: s, m: m}
}

var (
	_ conformance.UserClients = (*harness)(nil)
	_ conformance.UserClients = (*pgHarness)(nil)
)

// NewUserDriver makes a Driver as a service does, over its own *sql.DB of
// sql.Open("mysql", dsn) with the DSN only (the library's defaults: no
// multiStatements, no read timeout, an unlimited pool) and nil Options
// but the test table, dialing through a proxy of its own for the faults.
func (h *harness) NewUserDriver(ctx context.Context) (backend.Driver, error) {
	p, err := sandbox.StartProxy(h.s.addr)
	if err != nil {
		return nil, err
	}
	db, err := sql.Open("mysql", sandbox.MySQLDSN(p.Addr()))
	if err != nil {
		_ = p.Close()
		return nil, err
	}
	d, err := sqllock.New(ctx, db, &sqllock.Options{Table: testTable})
	if err != nil {
		_ = db.Close()
		_ = p.Close()
		return nil, err
	}
	h.add(d, &client{db: db, p: p})
	return d, nil
}

func (h *harness) NewDriver(ctx context.Context) (backend.Driver, error) {
	newDB := func(addr func() string) *sql.DB { return h.s.newDB(addr, h.m.batch) }
	return h.newDriver(ctx, h.s.addr, newDB, &sqllock.Options{Table: testTable, NoProcedure: h.m.noProc})
}

// isCommand reports whether chunk starts a MySQL command packet.
func isCommand(chunk []byte) bool {
	const comQuit = 0x01
	return len(chunk) >= 5 && chunk[3] == 0 && chunk[4] != comQuit
}

// Delete kills the holder's session from an admin connection.
func (h *harness) Delete(ctx context.Context, key string) error {
	return h.s.killHolder(ctx, key)
}

func (s *server) killHolder(ctx context.Context, key string) error {
	var id uint64
	q := "SELECT holder_id FROM `" + testTable + sqllock.LiveSuffix + "` WHERE name = ?"
	if err := s.admin.QueryRowContext(ctx, q, key).Scan(&id); err != nil {
		return fmt.Errorf("holder of %q: %w", key, err)
	}
	_, err := s.admin.ExecContext(ctx, fmt.Sprintf("KILL CONNECTION %d", id))
	return err
}
