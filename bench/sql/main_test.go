// Package sqlbench compares distlock's MySQL/MariaDB backend with GET_LOCK
// and with a bare BEGIN; SELECT ... FOR UPDATE; COMMIT on the same server,
// in one run: go test -v -run TestCompare ./sql/
package sqlbench

import (
	"context"
	"database/sql"
	"fmt"
	"net"
	"os"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"

	"github.com/distlock/distlock/sandbox"
)

// addr is the sandbox MariaDB server every scenario uses.
var addr string

// TestMain starts one MariaDB with the distribution's default settings
// (sandbox.Spec.Stock: what a user with a stock server has), runs the
// comparison's tests against it, and stops it.
func TestMain(m *testing.M) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	g, err := sandbox.Start(ctx, sandbox.Spec{Kind: sandbox.MariaDB, Stock: true})
	cancel()
	if err != nil {
		fmt.Fprintf(os.Stderr, "sqlbench: no MariaDB server: %v\n", err)
		os.Exit(1)
	}
	addr = g.Addrs()[0]
	code := m.Run()
	if err := g.Close(); err != nil {
		fmt.Fprintln(os.Stderr, "sqlbench:", err)
	}
	os.Exit(code)
}

// openDBWith opens a pool on the server at addr with client-side
// interpolation (interpolateParams: one round trip per statement), with
// multiStatements if batch (several statements per round trip), as a
// URL-opened distlock driver has, and a dialer if dial is not nil.
func openDBWith(addr string, batch bool, dial func(ctx context.Context, addr string) (net.Conn, error)) *sql.DB {
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
