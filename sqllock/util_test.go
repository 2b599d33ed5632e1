package sqllock_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"testing"
	"time"

	"github.com/distlock/distlock"
	"github.com/distlock/distlock/sqllock"
)

func uniqueKey(name string) string {
	var b [6]byte
	_, _ = rand.Read(b[:])
	return "sqllock-test-" + name + "-" + hex.EncodeToString(b[:])
}

func ctxFor(t *testing.T, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

// newDriver makes a Driver over its own *sql.DB, closed when the test ends.
func newDriver(t *testing.T, s *server, opts sqllock.Options) (*sqllock.Driver, *client) {
	t.Helper()
	return newDriverMode(t, s, opts, false)
}

// newDriverMode is newDriver over a *sql.DB that batches statements
// (multiStatements) or not.
func newDriverMode(t *testing.T, s *server, opts sqllock.Options, batch bool) (*sqllock.Driver, *client) {
	t.Helper()
	c := &client{}
	c.db = s.newDB(s.addr, batch)
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
	return newLockerMode(t, s, ttl, false)
}

func newLockerMode(t *testing.T, s *server, ttl time.Duration, batch bool) *distlock.Locker {
	t.Helper()
	d, _ := newDriverMode(t, s, sqllock.Options{}, batch)
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

// bothModes runs f with statements sent one at a time, then in batches.
func bothModes(t *testing.T, f func(t *testing.T, batch bool)) {
	t.Run("statements", func(t *testing.T) { f(t, false) })
	t.Run("batched", func(t *testing.T) { f(t, true) })
}
