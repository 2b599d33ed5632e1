package sqllock

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"fmt"
	"regexp"
	"strings"

	"github.com/distlock/distlock/backend"
	"github.com/go-sql-driver/mysql"
	"github.com/jackc/pgx/v5/stdlib"
)

// mysqlVersion matches what MySQL and MariaDB answer to SELECT version():
// "8.0.36", "8.4.3-log", "10.11.6-MariaDB-0+deb12u1".
var mysqlVersion = regexp.MustCompile(`^\d+\.\d+\.\d+`)

// dialectFor picks db's dialect: the one named (Options.Dialect), else
// the driver's (pgx's stdlib is PostgreSQL, go-sql-driver MySQL), else,
// for a driver sqllock does not know (one wrapped by instrumentation such
// as otelsql), the server's answer to SELECT version(). When it cannot
// tell, the error says what it saw and how to name the dialect.
func dialectFor(ctx context.Context, db *sql.DB, name string) (dialect, error) {
	switch strings.ToLower(name) {
	case "postgres", "postgresql":
		return pgDialect{}, nil
	case "mysql", "mariadb":
		return mysqlDialect{}, nil
	case "":
	default:
		return nil, fmt.Errorf("sqllock: %w: Dialect %q: want \"postgres\" or \"mysql\" (MariaDB too), or \"\" to tell it from the driver or the server", backend.ErrInvalidConfig, name)
	}
	switch db.Driver().(type) {
	case *stdlib.Driver:
		return pgDialect{}, nil
	case *mysql.MySQLDriver:
		return mysqlDialect{}, nil
	}
	var v string
	if err := db.QueryRowContext(ctx, "SELECT version()").Scan(&v); err != nil {
		if re := refused(err); re != nil {
			return nil, fmt.Errorf("sqllock: connect: %w", re)
		}
		return nil, fmt.Errorf("sqllock: dialect of a *sql.DB whose driver is %T (not pgx's stdlib nor go-sql-driver/mysql): SELECT version(): %w: %w (or set Options.Dialect)", db.Driver(), backend.ErrUnavailable, err)
	}
	switch {
	case strings.HasPrefix(v, "PostgreSQL "):
		return pgDialect{}, nil
	case mysqlVersion.MatchString(v):
		return mysqlDialect{}, nil
	}
	if len(v) > 80 {
		v = v[:80] + "..."
	}
	return nil, fmt.Errorf("sqllock: %w: cannot tell the dialect of a *sql.DB whose driver is %T from the server's version() %q: sqllock speaks PostgreSQL and MySQL/MariaDB; set Options.Dialect to \"postgres\" or \"mysql\" if the server is one of them", backend.ErrInvalidConfig, db.Driver(), v)
}

// driverConn is the driver's own connection behind dc, one of a *sql.DB's
// connections (sql.Conn.Raw): dc itself, or the connection an
// instrumenting wrapper hands out through Raw() driver.Conn
// (github.com/XSAM/otelsql) or Unwrap() driver.Conn.
func driverConn(dc any) any {
	for range 8 { // wrappers of wrappers, boundedly
		switch w := dc.(type) {
		case *stdlib.Conn:
			return w
		case interface{ Raw() driver.Conn }:
			dc = w.Raw()
		case interface{ Unwrap() driver.Conn }:
			dc = w.Unwrap()
		default:
			return dc
		}
	}
	return dc
}
