package sqllock_test

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"testing"
	"time"

	"github.com/distlock/distlock"
	"github.com/distlock/distlock/internal/testctx"
	"github.com/distlock/distlock/sqllock"
)

func uniqueKey(name string) string {
	var b [6]byte
	_, _ = rand.Read(b[:])
	return "sqllock-test-" + name + "-" + hex.EncodeToString(b[:])
}

// ctxFor returns a context that ends after d (testctx.For).
var ctxFor = testctx.For

// newDriver makes a MySQL Driver over its own *sql.DB, closed when the
// test ends.
func newDriver(t *testing.T, s *server, opts sqllock.Options) (*sqllock.Driver, *client) {
	t.Helper()
	return newDriverMode(t, s, opts, mode{})
}

// newDriverMode is newDriver in mode m.
func newDriverMode(t *testing.T, s *server, opts sqllock.Options, m mode) (*sqllock.Driver, *client) {
	t.Helper()
	return mysqlRow(m).newDriver(t, s, opts)
}

// newLockerMode makes a MySQL Locker in mode m over a new Driver, closed
// when the test ends.
func newLockerMode(t *testing.T, s *server, ttl time.Duration, m mode) *distlock.Locker {
	t.Helper()
	l, _ := mysqlRow(m).newLocker(t, s, ttl, sqllock.Options{})
	return l
}

func release(t *testing.T, le *distlock.Lease) {
	t.Helper()
	if err := le.Release(ctxFor(t, 10*time.Second)); err != nil {
		t.Errorf("Release(%q): %v", le.Key(), err)
	}
}

// mode is how a MySQL Driver sends its statements.
type mode struct {
	batch  bool // multiStatements: one batch per round trip, as a URL-opened Driver
	noProc bool // Options.NoProcedure: two statements where a wait would CALL the procedure
}

// mysqlRow is the MySQL row of mode m.
func mysqlRow(m mode) *dialect {
	for _, d := range dialects {
		if !d.pg && d.m == m {
			return d
		}
	}
	panic(fmt.Sprintf("no MySQL row of mode %+v", m))
}

// bothModes runs f with statements sent one at a time (blocking waits CALL
// the procedure), then in batches; allModes also with the two statements
// a wait sends without the procedure. These are the MySQL tests' modes,
// the MySQL rows of dialects.
func bothModes(t *testing.T, f func(t *testing.T, m mode)) { mysqlModes(t, mysqlProc|mysqlBatched, f) }

func allModes(t *testing.T, f func(t *testing.T, m mode)) { mysqlModes(t, allMySQL, f) }

func mysqlModes(t *testing.T, set rowSet, f func(t *testing.T, m mode)) {
	for _, d := range dialects {
		if d.id&set != 0 && !d.pg {
			t.Run(d.mode, func(t *testing.T) { f(t, d.m) })
		}
	}
}
