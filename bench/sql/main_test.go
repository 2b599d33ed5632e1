// Package sqlbench compares distlock's MySQL/MariaDB backend with GET_LOCK
// and with a bare BEGIN; SELECT ... FOR UPDATE; COMMIT on the same server,
// in one run: go test -v -run TestCompare ./sql/
package sqlbench

import (
	"context"
	"database/sql"
	"net"
	"sync/atomic"
	"testing"

	"github.com/go-sql-driver/mysql"

	"github.com/distlock/distlock/bench/internal/lockbench"
	"github.com/distlock/distlock/sandbox"
)

// addr is the sandbox MariaDB server every scenario uses.
var addr string

func TestMain(m *testing.M) { lockbench.Main(m, sandbox.MariaDB, &addr) }

// openDB opens a pool on the sandbox server. Every contender uses the same
// settings: client-side interpolation (one round trip per statement), as a
// URL-opened distlock driver does.
func openDB() *sql.DB { return openDBWith(false, nil) }

// openDBWith is openDB with multiStatements (batch: several statements per
// round trip, as a URL-opened distlock driver has) and a dialer.
func openDBWith(batch bool, dial func(ctx context.Context, addr string) (net.Conn, error)) *sql.DB {
	cfg, err := mysql.ParseDSN(sandbox.MySQLDSN(addr))
	if err != nil {
		panic(err)
	}
	cfg.InterpolateParams = true
	cfg.MultiStatements = batch
	if dial != nil {
		cfg.DialFunc = func(ctx context.Context, _, addr string) (net.Conn, error) { return dial(ctx, addr) }
	}
	conn, err := mysql.NewConnector(cfg)
	if err != nil {
		panic(err)
	}
	db := sql.OpenDB(conn)
	db.SetMaxIdleConns(64)
	return db
}

// countingDial dials the server and counts every write on the connection
// in n: each request (command) the client sends is one write.
func countingDial(n *atomic.Int64) func(ctx context.Context, addr string) (net.Conn, error) {
	return func(ctx context.Context, addr string) (net.Conn, error) {
		var d net.Dialer
		c, err := d.DialContext(ctx, "tcp", addr)
		if err != nil {
			return nil, err
		}
		return &countingConn{Conn: c, n: n}, nil
	}
}

type countingConn struct {
	net.Conn
	n *atomic.Int64
}

func (c *countingConn) Write(b []byte) (int, error) {
	c.n.Add(1)
	return c.Conn.Write(b)
}
