package distlock_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/distlock/distlock"
	"github.com/distlock/distlock/backend"
	"github.com/distlock/distlock/memlock"
)

// A default TTL the store cannot honour (WithDefaultTTL, or a URL's ttl)
// is refused when the Locker is made, naming the TTL and the minimum,
// instead of failing every acquisition (issue 32, item 7). New panics, as
// for any impossible option.
func TestDefaultTTLBelowMinimum(t *testing.T) {
	inner, _ := memlock.NewStore().NewDriver(nil)
	var got any
	func() {
		defer func() { got = recover() }()
		// memlock with a minimum TTL of a second, as sqllock's.
		minTTL := capsDriver{inner, func(c *backend.Capabilities) { c.MinTTL = time.Second }}
		l := distlock.New(minTTL, distlock.WithDefaultTTL(500*time.Millisecond))
		l.Close()
	}()
	err, _ := got.(error)
	if !errors.Is(err, distlock.ErrInvalidConfig) || !strings.Contains(fmt.Sprint(got), "500ms") || !strings.Contains(fmt.Sprint(got), "minimum of 1s") {
		t.Errorf("New with a default TTL below the minimum: panic %v, want ErrInvalidConfig naming 500ms and the minimum of 1s", got)
	}
}

// WithTTL(0) is the Locker's default TTL, as documented: the lease's TTL
// is WithDefaultTTL's.
func TestWithTTLZeroIsDefault(t *testing.T) {
	l := newLocker(t, memlock.NewStore(), "", distlock.WithDefaultTTL(7*time.Second))
	start := time.Now()
	le, err := l.TryAcquire(context.Background(), "k", distlock.WithTTL(0), distlock.WithoutAutoRenew())
	if err != nil {
		t.Fatal(err)
	}
	defer le.Release(context.Background())
	// The deadline is the TTL less the clock-drift margin (1% + 2ms).
	if got := le.Deadline().Sub(start); got < 6*time.Second || got > 7*time.Second {
		t.Errorf("WithTTL(0): deadline %v after the acquisition, want the default TTL of 7s less the drift margin", got)
	}
}
