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

// openErrRow is one SQL store of the bad-input tests: its URL scheme,
// how to start its server, and the sandbox's user of that server.
type openErrRow struct {
	scheme         string
	start          func(t *testing.T) string // the server's address
	user, password string
}

// url is the store's URL of db at addr, logged in as user.
func (row openErrRow) url(addr, user, password, db, query string) string {
	u := url.URL{Scheme: row.scheme, User: url.UserPassword(user, password), Host: addr, Path: "/" + db, RawQuery: query}
	return u.String()
}

// openErrRows are the stores the bad-input tests run against.
var openErrRows = []openErrRow{
	{"postgres", func(t *testing.T) string { return startPG(t).addr() }, sandbox.PostgresUser, sandbox.PostgresPassword},
	{"mysql", func(t *testing.T) string { return startServer(t).addr() }, "root", sandbox.RootPassword},
}

// forEachStore runs check as a subtest for each of openErrRows, with the
// store's server started (at addr) and a context bounded by a minute.
func forEachStore(t *testing.T, check func(t *testing.T, ctx context.Context, row openErrRow, addr string)) {
	for _, row := range openErrRows {
		t.Run(row.scheme, func(t *testing.T) {
			addr := row.start(t)
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			check(t, ctx, row, addr)
		})
	}
}

// openErr is the error of Open of rawURL (a Locker it returns is closed).
func openErr(ctx context.Context, rawURL string) error {
	l, err := distlock.Open(ctx, rawURL)
	if err == nil {
		l.Close()
	}
	return err
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
	forEachStore(t, func(t *testing.T, ctx context.Context, row openErrRow, addr string) {
		for _, tc := range []struct {
			name, user, password, db string
		}{
			{"wrong password", row.user, badPassword, sandbox.Database},
			{"unknown user", "nobody_here", badPassword, sandbox.Database},
			{"unknown database", row.user, row.password, "no_such_db"},
		} {
			t.Run(tc.name, func(t *testing.T) {
				for _, query := range []string{"", "create_table=false"} {
					err := openErr(ctx, row.url(addr, tc.user, tc.password, tc.db, query))
					checkOneLine(t, err, distlock.ErrInvalidConfig, `"`+tc.user+`"`, addr, `"`+tc.db+`"`)
					if strings.Contains(err.Error(), "tls") || strings.Contains(err.Error(), "TLS") {
						t.Errorf("the error speaks of TLS, which has nothing to do with it: %v", err)
					}
				}
			})
		}
	})
}

// A URL ttl below the store's minimum (1 s for SQL: the server's timeouts
// count whole seconds) is refused by Open, naming the TTL and the minimum,
// instead of failing every acquisition later (issue 32, item 7).
func TestOpenTTLBelowMinimum(t *testing.T) {
	forEachStore(t, func(t *testing.T, ctx context.Context, row openErrRow, addr string) {
		err := openErr(ctx, row.url(addr, row.user, row.password, sandbox.Database, "ttl=500ms"))
		checkOneLine(t, err, distlock.ErrInvalidConfig, "500ms", "minimum of 1s")
	})
}
