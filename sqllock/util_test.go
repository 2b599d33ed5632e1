package sqllock_test

import (
	"crypto/rand"
	"encoding/hex"
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

// newDriver makes a Driver over its own *sql.DB, closed when the test ends.
func newDriver(t *testing.T, s *server, opts sqllock.Options) (*sqllock.Driver, *client) {
	t.Helper()
	return newDriverMode(t, s, opts, mode{})
}

// newDriverMode is newDriver in mode m.
func newDriverMode(t *testing.T, s *server, opts sqllock.Options, m mode) (*sqllock.Driver, *client) {
	t.Helper()
	c := &client{}
	c.db = s.newDB(s.addr, m.batch)
	opts.NoProcedure = opts.NoProcedure || m.noProc
	if opts.Table == "" {
		opts.Table = testTable
	}
	d, err := sqllock.New(ctxFor(t, 30*time.Second), c.db, &opts)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	t.Cleanup(func() { _ = c.db.Close() })
	t.Cleanup(func() { _ = d.Close() }) // first: it returns its spare connections
	return d, c
}

// newLocker makes a Locker over a new Driver, closed when the test ends.
func newLocker(t *testing.T, s *server, ttl time.Duration) *distlock.Locker {
	t.Helper()
	return newLockerMode(t, s, ttl, mode{})
}

func newLockerMode(t *testing.T, s *server, ttl time.Duration, m mode) *distlock.Locker {
	t.Helper()
	d, _ := newDriverMode(t, s, sqllock.Options{}, m)
	l := distlock.New(d, distlock.WithDefaultTTL(ttl))
	t.Cleanup(func() { _ = l.Close() })
	return l
}

func release(t *testing.T, le *distlock.Lease) {
	t.Helper()
	if err := le.Release(ctxFor(t, 10*time.Second)); err != nil {
		t.Errorf("Release(%q): %v", le.Key(), err)
	}
}

// mode is how a test's Drivers send their statements.
type mode struct {
	batch  bool // multiStatements: one batch per round trip, as a URL-opened Driver
	noProc bool // Options.NoProcedure: two statements where a wait would CALL the procedure
}

// bothModes runs f with statements sent one at a time (blocking waits CALL
// the procedure), then in batches.
func bothModes(t *testing.T, f func(t *testing.T, m mode)) {
	t.Run("procedure", func(t *testing.T) { f(t, mode{}) })
	t.Run("batched", func(t *testing.T) { f(t, mode{batch: true}) })
}

// allModes is bothModes, and also with the two statements a wait sends
// without the procedure.
func allModes(t *testing.T, f func(t *testing.T, m mode)) {
	bothModes(t, f)
	t.Run("statements", func(t *testing.T) { f(t, mode{noProc: true}) })
}
