package sqllock_test

import (
	"context"
	"errors"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/distlock/distlock"
	"github.com/distlock/distlock/sandbox"
)

// openErrRow is one SQL store of the bad-input tests: how to start its
// server and write its URL.
type openErrRow struct {
	name  string
	start func(t *testing.T) string // the server's address
	url   func(addr, user, password, db, query string) string
}

func sqlURL(scheme, addr, user, password, db, query string) string {
	u := url.URL{Scheme: scheme, User: url.UserPassword(user, password), Host: addr, Path: "/" + db, RawQuery: query}
	return u.String()
}

// openErrRows are the stores the bad-input tests run against.
var openErrRows = []openErrRow{
	{
		name:  "postgres",
		start: func(t *testing.T) string { return startPG(t).addr() },
		url: func(addr, user, password, db, query string) string {
			return sqlURL("postgres", addr, user, password, db, query)
		},
	},
	{
		name:  "mysql",
		start: func(t *testing.T) string { return startServer(t).addr() },
		url: func(addr, user, password, db, query string) string {
			return sqlURL("mysql", addr, user, password, db, query)
		},
	},
}

// rowUser is the sandbox's user of row's server.
func rowUser(row openErrRow) string {
	if row.name == "postgres" {
		return sandbox.PostgresUser
	}
	return "root"
}

func rowPassword(row openErrRow) string {
	if row.name == "postgres" {
		return sandbox.PostgresPassword
	}
	return sandbox.RootPassword
}

// badPassword is a password no error may show.
const badPassword = "wrong-Zq8-never-printed"

// checkOneLine fails t unless err is one line, matches want and not
// ErrUnavailable, contains every one of parts and shows no password.
func checkOneLine(t *testing.T, err error, want error, parts ...string) {
	t.Helper()
	if err == nil {
		t.Fatalf("no error, want %v", want)
	}
	t.Logf("error: %v", err)
	if !errors.Is(err, want) {
		t.Errorf("%v: want %v", err, want)
	}
	if want != distlock.ErrUnavailable && errors.Is(err, distlock.ErrUnavailable) {
		t.Errorf("%v: matches ErrUnavailable too (the CLI would exit 69, retry later)", err)
	}
	for _, p := range parts {
		if !strings.Contains(err.Error(), p) {
			t.Errorf("error %q does not contain %q", err, p)
		}
	}
	if strings.Contains(err.Error(), badPassword) {
		t.Errorf("the error shows the password: %v", err)
	}
	if strings.ContainsAny(err.Error(), "\n\t") {
		t.Errorf("the error spans several lines: %q", err)
	}
}

// A wrong password, an unknown user or an unknown database is a
// configuration error at Open (ErrInvalidConfig, the CLI's 64, as for
// Redis), in one line naming the user, host and database, with no TLS
// noise and never the password (issue 32, item 2).
func TestOpenRefusedLoginSQL(t *testing.T) {
	for _, row := range openErrRows {
		t.Run(row.name, func(t *testing.T) {
			addr := row.start(t)
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			for _, tc := range []struct {
				name, user, password, db string
			}{
				{"wrong password", rowUser(row), badPassword, sandbox.Database},
				{"unknown user", "nobody_here", badPassword, sandbox.Database},
				{"unknown database", rowUser(row), rowPassword(row), "no_such_db"},
			} {
				t.Run(tc.name, func(t *testing.T) {
					for _, query := range []string{"", "create_table=false"} {
						l, err := distlock.Open(ctx, row.url(addr, tc.user, tc.password, tc.db, query))
						if err == nil {
							l.Close()
						}
						checkOneLine(t, err, distlock.ErrInvalidConfig, `"`+tc.user+`"`, addr, `"`+tc.db+`"`)
						if strings.Contains(err.Error(), "tls") || strings.Contains(err.Error(), "TLS") {
							t.Errorf("the error speaks of TLS, which has nothing to do with it: %v", err)
						}
					}
				})
			}
		})
	}
}

// A URL ttl below the store's minimum (1 s for SQL: the server's timeouts
// count whole seconds) is refused by Open, naming the TTL and the minimum,
// instead of failing every acquisition later (issue 32, item 7).
func TestOpenTTLBelowMinimum(t *testing.T) {
	for _, row := range openErrRows {
		t.Run(row.name, func(t *testing.T) {
			addr := row.start(t)
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			l, err := distlock.Open(ctx, row.url(addr, rowUser(row), rowPassword(row), sandbox.Database, "ttl=500ms"))
			if err == nil {
				l.Close()
			}
			checkOneLine(t, err, distlock.ErrInvalidConfig, "500ms", "minimum of 1s")
		})
	}
}
