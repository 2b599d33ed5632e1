package distlock_test

import (
	"context"
	"errors"
	"testing"

	"github.com/distlock/distlock"
	"github.com/distlock/distlock/memlock"
)

// TestReleasedCause: a released Lease's context ends with a cause that
// names the key and matches ErrReleased, as does Err, and a second Release
// says it was already released.
func TestReleasedCause(t *testing.T) {
	l := newLocker(t, memlock.NewStore(), "")
	ctx := context.Background()
	le, err := l.Acquire(ctx, "cause-key")
	if err != nil {
		t.Fatal(err)
	}
	if err := le.Release(ctx); err != nil {
		t.Fatal(err)
	}
	cause := context.Cause(le.Context())
	if !errors.Is(cause, distlock.ErrReleased) || !errors.Is(le.Err(), distlock.ErrReleased) {
		t.Fatalf("cause %v, Err %v: want both to match ErrReleased", cause, le.Err())
	}
	if want := `distlock: lease on "cause-key": ` + distlock.ErrReleased.Error(); cause.Error() != want {
		t.Errorf("cause %q, want %q", cause, want)
	}
	if err := le.Release(ctx); !errors.Is(err, distlock.ErrReleased) {
		t.Errorf("second Release: %v, want ErrReleased", err)
	}
}
