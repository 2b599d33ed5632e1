package distlock_test

import (
	"context"
	"log/slog"
	"testing"
	"testing/synctest"

	"github.com/distlock/distlock"
	"github.com/distlock/distlock/memlock"
)

// Log lines carry the owner whole: cut at 12 bytes, "replica-a:8080.<suffix>"
// read "replica-a:80", a different host's port (issue 32, item 9).
func TestLogKeepsOwnerWhole(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rec := &recorder{}
		l := newLocker(t, memlock.NewStore(), "", distlock.WithLogger(slog.New(rec)))
		const owner = "replica-a:8080.0123456789abcdef"
		le, err := l.TryAcquire(context.Background(), "k", distlock.WithOwner(owner))
		if err != nil {
			t.Fatal(err)
		}
		if err := le.Release(context.Background()); err != nil {
			t.Fatal(err)
		}
		synctest.Wait()
		n := 0
		for _, r := range rec.atLeast(slog.LevelDebug) {
			r.Attrs(func(a slog.Attr) bool {
				if a.Key == "owner" {
					n++
					if got := a.Value.String(); got != owner {
						t.Errorf("%q logs owner=%q, want %q", r.Message, got, owner)
					}
				}
				return true
			})
		}
		if n == 0 {
			t.Fatal("no log line with an owner")
		}
	})
}
