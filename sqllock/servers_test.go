package sqllock_test

// This file is the only one of the package's external tests that names
// the sandbox package: servers are started, stopped, addressed and
// proxied through the helpers below, so a change in how the sandbox is
// imported (store-specific parts in packages of their own) touches this
// file alone.

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/distlock/distlock/sandbox"
	"github.com/go-sql-driver/mysql"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/stdlib"
)

// The sandbox servers' credentials and database.
const (
	dbName       = sandbox.Database
	rootPassword = sandbox.RootPassword     // MariaDB's root
	pgPassword   = sandbox.PostgresPassword // PostgreSQL's superuser
)

// server is one sandbox server of a dialect, shared by the package's tests:
// started by the first test that needs it and stopped by TestMain.
type server struct {
	g     *sandbox.Group
	pg    bool // PostgreSQL, else MariaDB
	admin *sql.DB
}

// kinds of the shared servers, by dialect.
var serverKind = map[bool]sandbox.Kind{false: sandbox.MariaDB, true: sandbox.Postgres}

var shared struct {
	mu   sync.Mutex
	srv  map[bool]*server
	errs map[bool]error
}

// startServer returns the shared MariaDB; startPG the shared PostgreSQL.
func startServer(t *testing.T) *server { return startShared(t, false) }
func startPG(t *testing.T) *server     { return startShared(t, true) }

// startShared returns the shared server of the dialect (pg: PostgreSQL),
// starting it on first use. When no provider can run it, the test is
// skipped in auto mode and fails when a provider was asked for
// (DISTLOCK_SANDBOX=docker or local).
func startShared(t *testing.T, pg bool) *server {
	t.Helper()
	shared.mu.Lock()
	defer shared.mu.Unlock()
	if shared.srv == nil {
		shared.srv, shared.errs = map[bool]*server{}, map[bool]error{}
	}
	if shared.srv[pg] == nil && shared.errs[pg] == nil {
		ctx, cancel := context.WithTimeout(context.Background(), sandbox.DefaultStartTimeout+time.Minute)
		defer cancel()
		g, err := sandbox.Start(ctx, sandbox.Spec{Kind: serverKind[pg], Logf: func(string, ...any) {}})
		if err != nil {
			shared.errs[pg] = err
		} else {
			s := &server{g: g, pg: pg}
			s.admin = s.newDB(s.addr, false)
			shared.srv[pg] = s
		}
	}
	if err := shared.errs[pg]; err != nil {
		skipIfUnavailable(t, serverKind[pg], err)
		t.Fatalf("starting %s: %v", serverKind[pg], err)
	}
	return shared.srv[pg]
}

// skipIfUnavailable skips t when err says no provider can run kind here
// and none was asked for.
func skipIfUnavailable(t *testing.T, kind sandbox.Kind, err error) {
	t.Helper()
	setting, serr := sandbox.ProviderSetting(sandbox.Spec{Kind: kind})
	if serr == nil && setting == sandbox.ProviderAuto && errors.Is(err, sandbox.ErrUnavailable) {
		t.Skipf("no %s here: %v", kind, err)
	}
}

// stopServers stops the shared servers that were started.
func stopServers() error {
	shared.mu.Lock()
	defer shared.mu.Unlock()
	var errs []error
	for pg, s := range shared.srv {
		_ = s.admin.Close()
		if err := s.g.Close(); err != nil {
			errs = append(errs, fmt.Errorf("stopping the %s sandbox: %w", serverKind[pg], err))
		}
	}
	return errors.Join(errs...)
}

// addr is the server's current address (a container's port changes when it
// is started again).
func (s *server) addr() string { return s.g.Node(0).Addr() }

// local reports whether the server runs as a process of this host (its
// pids are host pids).
func (s *server) local() bool { return s.g.Provider() == sandbox.ProviderLocal }

func (s *server) provider() string { return s.g.Provider() }

// stop, start and kill are the server's clean shutdown, start and crash
// (SIGKILL of every process).
func (s *server) stop(ctx context.Context) error  { return s.g.Node(0).Stop(ctx) }
func (s *server) start(ctx context.Context) error { return s.g.Node(0).Start(ctx) }
func (s *server) kill(ctx context.Context) error  { return s.g.Node(0).Kill(ctx) }

// restart stops the server cleanly and starts it again; crash kills it
// and starts it again (crash recovery).
func (s *server) restart(ctx context.Context) error {
	if err := s.stop(ctx); err != nil {
		return err
	}
	return s.start(ctx)
}

func (s *server) crash(ctx context.Context) error {
	if err := s.kill(ctx); err != nil {
		return err
	}
	return s.start(ctx)
}

// mysqlDSN is go-sql-driver's DSN of the sandbox MariaDB at addr.
func mysqlDSN(addr string) string { return sandbox.MySQLDSN(addr) }

// mysqlURL is the distlock URL of the sandbox MariaDB at addr.
func mysqlURL(addr string) string { return sandbox.MySQLURL(addr) }

// pgURL is the URL (pgx's, and distlock's) of the sandbox PostgreSQL at
// addr, without TLS; it has a query, so parameters go after "&".
func pgURL(addr string) string { return sandbox.PostgresURL(addr) }

// pgTLSURL is pgURL with sslmode=verify-full against the CA file ca.
func pgTLSURL(addr, ca string) string { return sandbox.PostgresTLSURL(addr, ca) }

// url is the distlock URL of s; dsn the DSN of its database/sql driver
// (sqlDriver).
func (s *server) url() string {
	if s.pg {
		return pgURL(s.addr())
	}
	return mysqlURL(s.addr())
}

func (s *server) dsn() string {
	if s.pg {
		return pgURL(s.addr())
	}
	return mysqlDSN(s.addr())
}

func (s *server) sqlDriver() string {
	if s.pg {
		return "pgx"
	}
	return "mysql"
}

// newDB opens a *sql.DB whose connections dial addr() (the server's
// current address, or a proxy's), asked per connection.
//
// MySQL: batch turns on multiStatements, as a URL-opened Driver does, so
// the Driver sends its statements in batches; without it, one at a time.
// PostgreSQL (pgx's stdlib) batches always; batch is ignored.
func (s *server) newDB(addr func() string, batch bool) *sql.DB {
	if s.pg {
		cfg := s.pgConfig(addr, nil)
		db := stdlib.OpenDB(*cfg)
		db.SetMaxIdleConns(16)
		return db
	}
	db := sql.OpenDB(s.mysqlConnector(addr, batch, nil))
	db.SetMaxIdleConns(16)
	return db
}

// dialer dials addr() for newDB's configurations; wrap, when not nil,
// wraps each connection.
func dialer(addr func() string, wrap func(net.Conn) net.Conn) func(ctx context.Context, _, _ string) (net.Conn, error) {
	return func(ctx context.Context, _, _ string) (net.Conn, error) {
		var d net.Dialer
		c, err := d.DialContext(ctx, "tcp", addr())
		if err != nil || wrap == nil {
			return c, err
		}
		return wrap(c), nil
	}
}

// mysqlConnector is newDB's MySQL connector (interpolateParams on), each
// connection wrapped by wrap when it is not nil.
func (s *server) mysqlConnector(addr func() string, batch bool, wrap func(net.Conn) net.Conn) driver.Connector {
	cfg, err := mysql.ParseDSN(mysqlDSN(s.addr()))
	if err != nil {
		panic(err)
	}
	cfg.InterpolateParams = true
	cfg.MultiStatements = batch
	cfg.DialFunc = dialer(addr, wrap)
	conn, err := mysql.NewConnector(cfg)
	if err != nil {
		panic(err)
	}
	return conn
}

// pgConfig is newDB's pgx configuration (5 s connect timeout), each
// connection wrapped by wrap when it is not nil.
func (s *server) pgConfig(addr func() string, wrap func(net.Conn) net.Conn) *pgx.ConnConfig {
	cfg, err := pgx.ParseConfig(pgURL(s.addr()))
	if err != nil {
		panic(err)
	}
	cfg.ConnectTimeout = 5 * time.Second
	cfg.DialFunc = dialer(addr, wrap)
	return cfg
}

// proxy is a fault-injecting TCP proxy in front of a server.
type proxy = sandbox.Proxy

// startProxy starts a proxy to addr().
func startProxy(addr func() string) (*proxy, error) { return sandbox.StartProxy(addr) }

// blackhole holds back p's traffic both ways until Heal.
func blackhole(p *proxy) { p.Blackhole(sandbox.Both) }

// certFiles are the files of a CA made for a test and the certificates it
// signed.
type certFiles = sandbox.CertFiles

// writeCerts makes a CA and its server and client certificates in dir.
func writeCerts(dir string) (certFiles, error) { return sandbox.WriteCerts(dir) }

// startTLSServer starts a server of the dialect of its own for t that
// serves TLS: PostgreSQL with the sandbox's certificates (Group.TLSFiles),
// MariaDB with certs's and refusing clients without TLS. It returns the
// server's address, its URL (PostgreSQL's with TLS verified; MariaDB's:
// none), and the TLS files the server uses.
func startTLSServer(t *testing.T, pg bool, certs certFiles) (addr, url string, files certFiles) {
	t.Helper()
	spec := sandbox.Spec{Kind: serverKind[pg], Logf: func(string, ...any) {}}
	if pg {
		spec.TLS = true
	} else {
		spec.MariaDBTLS = &sandbox.ServerTLS{CA: certs.CA, Cert: certs.ServerCert, Key: certs.ServerKey, Require: true}
	}
	ctx, cancel := context.WithTimeout(context.Background(), sandbox.DefaultStartTimeout+time.Minute)
	defer cancel()
	g, err := sandbox.Start(ctx, spec)
	if err != nil {
		skipIfUnavailable(t, spec.Kind, err)
		t.Fatalf("starting %s with TLS: %v", spec.Kind, err)
	}
	t.Cleanup(func() { _ = g.Close() })
	if !pg {
		return g.Addrs()[0], "", certs
	}
	tf, _ := g.TLSFiles()
	return g.Node(0).Addr(), g.URL(), certFiles{CA: tf.CA, ClientCert: tf.ClientCert, ClientKey: tf.ClientKey}
}
