package sqllock

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/distlock/distlock/backend"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/jackc/pgx/v5/stdlib"
)

func init() {
	backend.Register("postgres", openPostgres)
	backend.Register("postgresql", openPostgres)
}

// NewPool returns a Driver over pool, a github.com/jackc/pgx/v5 pool of
// PostgreSQL connections, through a *sql.DB of pgx's stdlib made from it
// (stdlib.OpenDBFromPool); it is otherwise [New]. Each held lock and each
// waiter holds one of pool's connections, and every acquisition briefly
// needs one more (the fencing counter): size pool's MaxConns to the locks
// held and waited for at once plus one. An acquisition that finds every
// connection in use waits within its ctx and then fails naming the pool. The Driver keeps no spare connection of its own, and never
// closes pool: close it after the Driver.
func NewPool(ctx context.Context, pool *pgxpool.Pool, opts *Options) (*Driver, error) {
	if pool == nil {
		return nil, fmt.Errorf("sqllock: %w: nil *pgxpool.Pool", backend.ErrInvalidConfig)
	}
	db := stdlib.OpenDBFromPool(pool)
	d, err := newDriver(ctx, db, pgDialect{}, opts)
	if err != nil {
		_ = db.Close()
		return nil, err
	}
	d.noSpares = true
	d.pool = pool
	d.onClose = func() { _ = db.Close() } // returns the connections to pool
	return d, nil
}

// pgParams are the URL parameters handed to pgx as they are (libpq's
// names and meanings).
var pgParams = []string{"sslmode", "sslrootcert", "sslcert", "sslkey", "application_name"}

// openPostgres is the backend.Opener for postgres:// and postgresql://
// URLs. It connects (CREATE TABLE IF NOT EXISTS, or a ping with
// create_table=false) within ctx and dial_timeout.
func openPostgres(ctx context.Context, u *backend.URL) (backend.Driver, error) {
	cfg, opts, err := pgConfigFromURL(u)
	if err != nil {
		return nil, err
	}
	opts.Server = net.JoinHostPort(cfg.Host, strconv.Itoa(int(cfg.Port)))
	// pgx's refusal names the user, server and database (refused): no at.
	d, err := openOwned(ctx, stdlib.OpenDB(*cfg), pgDialect{}, u.Hosts[0], opts, nil, "sslrootcert")
	if err != nil {
		return nil, err
	}
	return d, nil
}

// pgConfigFromURL turns postgres://user:pass@host:port/dbname?... into a
// pgx configuration. Its errors never contain the password.
func pgConfigFromURL(u *backend.URL) (*pgx.ConnConfig, Options, error) {
	q := u.Query
	opts := urlOptions(q, pgDialect{})
	dial := q.Duration("dial_timeout", 10*time.Second)
	switch q.Enum("mode", "row", "row", "advisory", "session") {
	case "advisory":
		opts.Advisory = true
	case "session":
		opts.Session = true
	}
	// Read in every mode, used in session mode.
	opts.Sessions = q.Int("sessions", 0, 1, 64)
	opts.Waiters = q.Int("waiters", 0, 1, 1024)
	pass := url.Values{}
	for _, name := range pgParams {
		if v := q.String(name, ""); v != "" {
			pass.Set(name, v)
		}
	}
	if m := pass.Get("sslmode"); m != "" {
		switch m {
		case "disable", "allow", "prefer", "require", "verify-ca", "verify-full":
		default:
			q.FailValue("sslmode", m, "want disable, allow, prefer, require, verify-ca or verify-full")
		}
	}
	if (pass.Get("sslcert") == "") != (pass.Get("sslkey") == "") {
		q.Fail("parameters sslcert and sslkey go together (a client certificate and its key)")
	}
	dbname := urlDatabase(u, opts.Table)
	if err := q.Err(); err != nil {
		return nil, opts, fmt.Errorf("sqllock: %w", err)
	}
	// pgx reads a '+' in a query value as itself, not as a space: a space
	// (in a file name) goes as %20. Encode writes a '+' as %2B.
	rawQuery := strings.ReplaceAll(pass.Encode(), "+", "%20")
	cs := url.URL{Scheme: "postgres", User: u.User, Host: u.HostsWithDefaultPort(5432)[0], Path: "/" + dbname, RawQuery: rawQuery}
	cfg, err := pgx.ParseConfig(cs.String())
	if err != nil {
		// pgx's error names the connection string with the password
		// replaced; say only what is wrong (Params hides any password
		// keyword a file name in it holds).
		msg := "invalid connection settings"
		var pe *pgconn.ParseConfigError
		if errors.As(err, &pe) {
			if in := errors.Unwrap(pe); in != nil {
				msg += ": " + in.Error()
			}
		} else {
			msg += ": " + err.Error()
		}
		q.Fail("%s", msg)
		return nil, opts, fmt.Errorf("sqllock: %w", q.Err())
	}
	cfg.ConnectTimeout = dial
	return cfg, opts, nil
}
