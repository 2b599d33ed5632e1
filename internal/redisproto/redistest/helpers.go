package redistest

import (
	"testing"
	"time"

	"github.com/distlock/distlock"
	"github.com/distlock/distlock/internal/testctx"
	"github.com/distlock/distlock/sandbox"
)

// MustHold acquires key on l within 30 s, or fails the test.
func MustHold(t *testing.T, l *distlock.Locker, key string) *distlock.Lease {
	t.Helper()
	le, err := l.Acquire(testctx.For(t, 30*time.Second), key)
	if err != nil {
		t.Fatalf("Acquire(%q): %v", key, err)
	}
	return le
}

// Restart stops n cleanly and starts it again, within 2 minutes.
func Restart(t *testing.T, n sandbox.Node) {
	t.Helper()
	ctx := testctx.For(t, 2*time.Minute)
	if err := n.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	if err := n.Start(ctx); err != nil {
		t.Fatal(err)
	}
}
