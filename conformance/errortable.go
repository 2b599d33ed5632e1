package conformance

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/distlock/distlock"
)

// testErrorTable runs bad input and refused requests against the store and
// checks that every error matches the same sentinels as on every other
// store, in one line, saying "distlock:" once (issue 32, item 8).
func testErrorTable(t *testing.T, e *env) {
	c := e.locker(t)
	key := e.key("errtable")
	held := mustAcquire(t, c, key)
	released := mustAcquire(t, c, e.key("errtable-released"))
	release(t, released)
	canceled, cancel := context.WithCancel(context.Background())
	cancel()
	other := e.locker(t)
	for _, tc := range []struct {
		name   string
		err    func() error
		want   error
		unwant []error
	}{
		{"empty key", func() error { _, err := c.TryAcquire(ctxFor(t, 10*time.Second), ""); return err },
			distlock.ErrInvalidKey, []error{distlock.ErrUnavailable}},
		{"negative TTL", func() error {
			_, err := c.TryAcquire(ctxFor(t, 10*time.Second), e.key("neg"), distlock.WithTTL(-time.Second))
			return err
		}, distlock.ErrInvalidConfig, []error{distlock.ErrUnavailable}},
		{"held elsewhere", func() error { _, err := other.TryAcquire(ctxFor(t, 10*time.Second), key); return err },
			distlock.ErrNotAcquired, []error{distlock.ErrUnavailable, distlock.ErrInvalidConfig}},
		{"second release", func() error { return released.Release(ctxFor(t, 10*time.Second)) },
			distlock.ErrReleased, []error{distlock.ErrUnavailable, distlock.ErrNotHeld}},
		{"TryAcquire with a canceled ctx", func() error { _, err := other.TryAcquire(canceled, e.key("canceled")); return err },
			context.Canceled, []error{distlock.ErrUnavailable, distlock.ErrNotAcquired}},
		{"Acquire with a canceled ctx", func() error { _, err := other.Acquire(canceled, key); return err },
			context.Canceled, []error{distlock.ErrUnavailable, distlock.ErrNotAcquired}},
	} {
		err := tc.err()
		switch {
		case err == nil:
			t.Errorf("%s: no error, want %v", tc.name, tc.want)
			continue
		case !errors.Is(err, tc.want):
			t.Errorf("%s: %v, want %v", tc.name, err, tc.want)
		}
		for _, u := range tc.unwant {
			if errors.Is(err, u) {
				t.Errorf("%s: %v matches %v too", tc.name, err, u)
			}
		}
		if msg := err.Error(); strings.Count(msg, "distlock:") != 1 || strings.Contains(msg, "\n") {
			t.Errorf("%s: %q: want one line saying distlock: once", tc.name, msg)
		}
	}
	release(t, held)
	e.part(t, "canceled-in-flight", func(t *testing.T) { testCanceledInFlight(t, e) })
}
