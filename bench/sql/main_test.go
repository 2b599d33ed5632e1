// Package sqlbench compares distlock's MySQL/MariaDB backend with GET_LOCK
// and with a bare BEGIN; SELECT ... FOR UPDATE; COMMIT on the same server,
// in one run: go test -v -run TestCompare ./sql/
package sqlbench

import (
	"context"
	"database/sql"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/distlock/distlock/sandbox"
	"github.com/go-sql-driver/mysql"
)

// addr is the sandbox MariaDB server every scenario uses.
var addr string

func TestMain(m *testing.M) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	g, err := sandbox.Start(ctx, sandbox.Spec{Kind: sandbox.MariaDB})
	cancel()
	if err != nil {
		fmt.Fprintln(os.Stderr, "sqlbench: no MariaDB server:", err)
		os.Exit(1)
	}
	addr = g.Addrs()[0]
	code := m.Run()
	if err := g.Close(); err != nil {
		fmt.Fprintln(os.Stderr, "sqlbench:", err)
	}
	os.Exit(code)
}

// openDB opens a pool on the sandbox server. Every contender uses the same
// settings: client-side interpolation (one round trip per statement), as a
// URL-opened distlock driver does.
func openDB() *sql.DB {
	cfg, err := mysql.ParseDSN(sandbox.MySQLDSN(addr))
	if err != nil {
		panic(err)
	}
	cfg.InterpolateParams = true
	conn, err := mysql.NewConnector(cfg)
	if err != nil {
		panic(err)
	}
	db := sql.OpenDB(conn)
	db.SetMaxIdleConns(64)
	return db
}
