package distlock_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/distlock/distlock"
	"github.com/distlock/distlock/memlock"
)

// TestContextOwnerChecked: an owner carried by the ctx (ContextWithOwner,
// e.g. an id received over RPC) is checked as WithOwner's is: 1 to 128
// printable bytes. It used to be sent to the store unchecked, whatever
// its length or bytes.
func TestContextOwnerChecked(t *testing.T) {
	l := newLocker(t, memlock.NewStore(), "")
	for _, owner := range []string{strings.Repeat("o", 129), "two words", "line\nbreak", "\x00"} {
		ctx := distlock.ContextWithOwner(context.Background(), owner)
		if le, err := l.TryAcquire(ctx, "k"); !errors.Is(err, distlock.ErrInvalidConfig) {
			t.Errorf("TryAcquire with ctx owner %q: %v, want ErrInvalidConfig", owner, err)
			if err == nil {
				_ = le.Release(context.Background())
			}
		}
		if m, err := l.TryAcquireAll(ctx, []string{"a", "b"}); !errors.Is(err, distlock.ErrInvalidConfig) {
			t.Errorf("TryAcquireAll with ctx owner %q: %v, want ErrInvalidConfig", owner, err)
			if err == nil {
				_ = m.Release(context.Background())
			}
		}
	}
}
