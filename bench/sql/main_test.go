// Package sqlbench compares distlock's MySQL/MariaDB backend with GET_LOCK
// and with a bare BEGIN; SELECT ... FOR UPDATE; COMMIT on the same server,
// in one run: go test -v -run TestCompare ./sql/
package sqlbench

import (
	"context"
	"database/sql"
	"net"
	"testing"

	"github.com/go-sql-driver/mysql"

	"github.com/distlock/distlock/bench/internal/lockbench"
	"github.com/distlock/distlock/sandbox"
)

// addr is the sandbox MariaDB server every scenario uses.
var addr string

func TestMain(m *testing.M) { lockbench.Main(m, sandbox.MariaDB, &addr) }

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
