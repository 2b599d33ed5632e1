package distlock_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/distlock/distlock"
	"github.com/distlock/distlock/memlock"
)

// readsOnce fails t unless err matches want and names the package and the
// key once each, in one line (issue 32, item 8: "distlock: release
// "rel/twice": already released: distlock: lease on "rel/twice": lease
// released", "distlock: leader "scheduler": distlock: no leader").
// A store's own error may name the key again (maxKey 2).
func readsOnce(t *testing.T, what string, err, want error, key string, maxKey int) {
	t.Helper()
	if err == nil {
		t.Fatalf("%s: no error, want %v", what, want)
	}
	if !errors.Is(err, want) {
		t.Errorf("%s: %v, want %v", what, err, want)
	}
	msg := err.Error()
	if n := strings.Count(msg, "distlock:"); n != 1 {
		t.Errorf("%s: %q says distlock: %d times, want once", what, msg, n)
	}
	if n := strings.Count(msg, `"`+key+`"`); n < 1 || n > maxKey {
		t.Errorf("%s: %q names %q %d times, want 1 to %d", what, msg, key, n, maxKey)
	}
	if strings.Contains(msg, "\n") {
		t.Errorf("%s: %q spans several lines", what, msg)
	}
}

func TestErrorsReadOnce(t *testing.T) {
	ctx := context.Background()
	store := memlock.NewStore()
	l := newLocker(t, store, "")

	le, err := l.TryAcquire(ctx, "rel/twice")
	if err != nil {
		t.Fatal(err)
	}
	if err := le.Release(ctx); err != nil {
		t.Fatal(err)
	}
	readsOnce(t, "second Release", le.Release(ctx), distlock.ErrReleased, "rel/twice", 1)

	lost, err := l.TryAcquire(ctx, "rel/lost")
	if err != nil {
		t.Fatal(err)
	}
	store.Delete("rel/lost")
	if err := lost.Refresh(ctx, 0); err == nil {
		t.Fatal("Refresh of a deleted lock succeeded")
	}
	<-lost.Done()
	readsOnce(t, "Release of a lost lease", lost.Release(ctx), distlock.ErrLost, "rel/lost", 2)

	e, err := l.Election("scheduler")
	if err != nil {
		t.Fatal(err)
	}
	_, err = e.Leader(ctx)
	readsOnce(t, "Leader with none", err, distlock.ErrNoLeader, "scheduler", 1)
	ld, err := e.Campaign(ctx, "a")
	if err != nil {
		t.Fatal(err)
	}
	defer ld.Resign(ctx)
	_, err = e.Campaign(ctx, "a")
	readsOnce(t, "Campaign while leading", err, distlock.ErrCampaigning, "scheduler", 1)
}
