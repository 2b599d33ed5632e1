package sqllock_test

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/stdlib"

	"github.com/distlock/distlock"
	"github.com/distlock/distlock/sandbox"
	"github.com/distlock/distlock/sqllock"
)

// hidingConnector wraps a driver's connector as instrumentation does
// (github.com/XSAM/otelsql): db.Driver() is the wrapper's own type, and
// each connection is a wrapper that hands out the driver's own one only
// through Raw() driver.Conn.
type hidingConnector struct{ c driver.Connector }

type hidingDriver struct{ c driver.Connector }

func (d hidingDriver) Open(string) (driver.Conn, error) {
	return nil, errors.New("hidingDriver: open through the connector")
}

func (h hidingConnector) Connect(ctx context.Context) (driver.Conn, error) {
	c, err := h.c.Connect(ctx)
	if err != nil {
		return nil, err
	}
	return &hidingConn{c}, nil
}

func (h hidingConnector) Driver() driver.Driver { return hidingDriver(h) }

type hidingConn struct{ driver.Conn }

// Raw is otelsql's way to reach the driver's connection.
func (c *hidingConn) Raw() driver.Conn { return c.Conn }

func (c *hidingConn) PrepareContext(ctx context.Context, q string) (driver.Stmt, error) {
	return c.Conn.(driver.ConnPrepareContext).PrepareContext(ctx, q)
}

func (c *hidingConn) ExecContext(ctx context.Context, q string, args []driver.NamedValue) (driver.Result, error) {
	ex, ok := c.Conn.(driver.ExecerContext)
	if !ok {
		return nil, driver.ErrSkip
	}
	return ex.ExecContext(ctx, q, args)
}

func (c *hidingConn) QueryContext(ctx context.Context, q string, args []driver.NamedValue) (driver.Rows, error) {
	qu, ok := c.Conn.(driver.QueryerContext)
	if !ok {
		return nil, driver.ErrSkip
	}
	return qu.QueryContext(ctx, q, args)
}

func (c *hidingConn) BeginTx(ctx context.Context, o driver.TxOptions) (driver.Tx, error) {
	return c.Conn.(driver.ConnBeginTx).BeginTx(ctx, o)
}

func (c *hidingConn) Ping(ctx context.Context) error {
	if p, ok := c.Conn.(driver.Pinger); ok {
		return p.Ping(ctx)
	}
	return nil
}

func (c *hidingConn) ResetSession(ctx context.Context) error {
	if r, ok := c.Conn.(driver.SessionResetter); ok {
		return r.ResetSession(ctx)
	}
	return nil
}

func (c *hidingConn) IsValid() bool {
	if v, ok := c.Conn.(driver.Validator); ok {
		return v.IsValid()
	}
	return true
}

func (c *hidingConn) CheckNamedValue(nv *driver.NamedValue) error {
	if ch, ok := c.Conn.(driver.NamedValueChecker); ok {
		return ch.CheckNamedValue(nv)
	}
	return driver.ErrSkip
}

// wrappedRows are the stores with a connector of their driver.
var wrappedRows = []struct {
	name      string
	start     func(t *testing.T) string
	connector func(t *testing.T, addr string) driver.Connector
}{
	{"postgres", func(t *testing.T) string { return startPG(t).addr() }, func(t *testing.T, addr string) driver.Connector {
		cfg, err := pgx.ParseConfig(sandbox.PostgresURL(addr))
		if err != nil {
			t.Fatal(err)
		}
		return stdlib.GetConnector(*cfg)
	}},
	{"mysql", func(t *testing.T) string { return startServer(t).addr() }, func(t *testing.T, addr string) driver.Connector {
		cfg, err := mysql.ParseDSN(sandbox.MySQLDSN(addr))
		if err != nil {
			t.Fatal(err)
		}
		c, err := mysql.NewConnector(cfg)
		if err != nil {
			t.Fatal(err)
		}
		return c
	}},
}

// New over a *sql.DB whose driver is wrapped (otelsql and the like) asks
// the server which dialect it speaks instead of taking MySQL for anything
// not pgx, and reaches the driver's connection through the wrapper's Raw
// (issue 32, item 4).
func TestNewOverWrappedDriver(t *testing.T) {
	for _, row := range wrappedRows {
		t.Run(row.name, func(t *testing.T) {
			addr := row.start(t)
			db := sql.OpenDB(hidingConnector{row.connector(t, addr)})
			defer db.Close()
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			d, err := sqllock.New(ctx, db, &sqllock.Options{Table: "wrapped_" + row.name})
			if err != nil {
				t.Fatalf("New over a wrapped %s driver: %v", row.name, err)
			}
			if got := d.Capabilities().Name; got != row.name {
				t.Errorf("dialect %q, want %q", got, row.name)
			}
			l := distlock.New(d)
			defer l.Close()
			key := uniqueKey(t.Name())
			le, err := l.TryAcquire(ctx, key)
			if err != nil {
				t.Fatalf("TryAcquire: %v", err)
			}
			if _, err := l.TryAcquire(ctx, key); !errors.Is(err, distlock.ErrNotAcquired) {
				t.Errorf("second TryAcquire: %v, want ErrNotAcquired", err)
			}
			got := make(chan error, 1)
			go func() {
				le2, err := l.Acquire(ctx, key)
				if err == nil {
					if le2.Token() <= le.Token() {
						err = errors.New("the waiter's token is not above the first holder's")
					}
					err = errors.Join(err, le2.Release(ctx))
				}
				got <- err
			}()
			if err := le.Release(ctx); err != nil {
				t.Fatalf("Release: %v", err)
			}
			if err := <-got; err != nil {
				t.Fatalf("the waiter: %v", err)
			}
		})
	}
}

// A dialect the server does not tell (Options.Dialect unset) or one that
// is unknown is refused, naming what was seen; Options.Dialect names it.
func TestNewDialectOption(t *testing.T) {
	addr := startPG(t).addr()
	cfg, err := pgx.ParseConfig(sandbox.PostgresURL(addr))
	if err != nil {
		t.Fatal(err)
	}
	db := sql.OpenDB(hidingConnector{stdlib.GetConnector(*cfg)})
	defer db.Close()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	d, err := sqllock.New(ctx, db, &sqllock.Options{Table: "wrapped_opt", Dialect: "postgres"})
	if err != nil {
		t.Fatalf("New with Dialect postgres: %v", err)
	}
	_ = d.Close()
	_, err = sqllock.New(ctx, db, &sqllock.Options{Table: "wrapped_opt", Dialect: "oracle"})
	if !errors.Is(err, distlock.ErrInvalidConfig) || !strings.Contains(err.Error(), `"oracle"`) {
		t.Errorf("New with Dialect oracle: %v, want ErrInvalidConfig naming it", err)
	}
}

// versionConn is a connection of a server that answers every query with
// one row, its version.
type versionConn struct{ version string }

func (c versionConn) Prepare(string) (driver.Stmt, error) { return nil, errors.New("no statements") }
func (c versionConn) Close() error                        { return nil }
func (c versionConn) Begin() (driver.Tx, error)           { return nil, errors.New("no transactions") }
func (c versionConn) QueryContext(context.Context, string, []driver.NamedValue) (driver.Rows, error) {
	return &versionRows{v: c.version}, nil
}

type versionRows struct {
	v    string
	done bool
}

func (r *versionRows) Columns() []string { return []string{"version"} }
func (r *versionRows) Close() error      { return nil }
func (r *versionRows) Next(dest []driver.Value) error {
	if r.done {
		return io.EOF
	}
	r.done = true
	dest[0] = r.v
	return nil
}

type versionConnector struct{ version string }

func (c versionConnector) Connect(context.Context) (driver.Conn, error) {
	return versionConn(c), nil
}
func (c versionConnector) Driver() driver.Driver { return hidingDriver{} }

// A server whose version() names neither dialect: New says what it saw
// and how to name the dialect.
func TestNewCannotTellDialect(t *testing.T) {
	db := sql.OpenDB(versionConnector{"CockroachDB CCL v23.1.11 (x86_64-pc-linux-gnu)"})
	defer db.Close()
	_, err := sqllock.New(context.Background(), db, nil)
	t.Logf("error: %v", err)
	if !errors.Is(err, distlock.ErrInvalidConfig) {
		t.Fatalf("New: %v, want ErrInvalidConfig", err)
	}
	for _, want := range []string{"CockroachDB CCL v23.1.11", "hidingDriver", "Options.Dialect"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not say %q", err, want)
		}
	}
}
