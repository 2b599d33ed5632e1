package distlock

import (
	"context"
	"errors"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/distlock/distlock/backend"
	"github.com/distlock/distlock/memlock"
)

// FuzzOptions (issue 27, item 6): the float and duration options of the
// root package (WithClockDrift, WithDefaultTTL, WithReleaseTimeout,
// WithTTL, WithLeaderTTL, WithObserveInterval) never panic and never let
// a value through that is not a number, is negative or overflows the
// deadline arithmetic: New refuses it (an error matching
// ErrInvalidConfig that names the option), or every lease it grants has
// a deadline after its grant and no later than a TTL after it.
func FuzzOptions(f *testing.F) {
	nan, inf := math.NaN(), math.Inf(1)
	s, ms := int64(time.Second), int64(time.Millisecond)
	for _, seed := range []struct {
		factor                         float64
		fixed, ttl, release, leader, o int64
		acquireTTL                     int64
	}{
		{0.01, 2 * ms, 30 * s, 5 * s, 0, 0, 0},     // the defaults
		{nan, 2 * ms, 30 * s, 5 * s, 0, 0, 10 * s}, // issue 27: NaN passed the range check
		{inf, 0, 0, 0, 0, 0, 0},
		{-inf, 0, 0, 0, 0, 0, 0},
		{-0.01, 0, 0, 0, 0, 0, 0},
		{0.5, 0, 0, 0, 0, 0, 0},
		{0.4999999, 0, s, 0, 0, 0, 0},
		{math.SmallestNonzeroFloat64, 0, 0, 0, 0, 0, 0},
		{0.01, math.MaxInt64, 0, 0, 0, 0, 0}, // factor×TTL + fixed overflowed
		{0.01, math.MinInt64, 0, 0, 0, 0, 0},
		{0.01, int64(backend.TTLLimit / 2), 0, 0, 0, 0, 0},
		{0.01, int64(backend.TTLLimit/2) - 1, int64(backend.TTLLimit), 0, 0, 0, int64(backend.TTLLimit)},
		{0.01, 0, -s, 0, 0, 0, 0},
		{0.01, 0, math.MaxInt64, 0, 0, 0, 0},
		{0.01, 0, int64(backend.TTLLimit), 0, 0, 0, 0},
		{0.01, 0, 0, -s, 0, 0, 0},
		{0.01, 0, 0, math.MaxInt64, 0, 0, 0},
		{0.01, 0, 0, 0, -s, 0, 0},
		{0.01, 0, 0, 0, math.MaxInt64, 0, 0},
		{0.01, 0, 0, 0, 0, -s, 0},
		{0.01, 0, 0, 0, 0, math.MaxInt64, 0},
		{0.01, 0, 0, 0, 0, 0, -s},
		{0.01, 0, 0, 0, 0, 0, math.MaxInt64},
		{0.01, 2 * ms, 0, 0, 0, 0, 3 * ms},
		{0, 0, 0, 0, 0, 0, ms},
	} {
		f.Add(seed.factor, seed.fixed, seed.ttl, seed.release, seed.leader, seed.o, seed.acquireTTL)
	}
	f.Fuzz(func(t *testing.T, factor float64, fixed, ttl, release, leader, observe, acquireTTL int64) {
		d, err := memlock.NewStore().NewDriver(nil)
		if err != nil {
			t.Fatal(err)
		}
		l, err := newLocker(d, []LockerOption{
			WithClockDrift(factor, time.Duration(fixed)),
			WithDefaultTTL(time.Duration(ttl)),
			WithReleaseTimeout(time.Duration(release)),
		})
		validFactor := factor >= 0 && factor < 0.5
		validFixed := fixed >= 0 && time.Duration(fixed) < maxDriftFixed
		// A default TTL must be one the store honours (memlock: from 1 ms).
		validTTL := ttl == 0 || (time.Duration(ttl) >= d.Capabilities().MinTTL && time.Duration(ttl) <= backend.TTLLimit)
		if err != nil {
			if !errors.Is(err, ErrInvalidConfig) {
				t.Fatalf("New refused the options with %v, not matching ErrInvalidConfig", err)
			}
			if !strings.Contains(err.Error(), "With") {
				t.Errorf("New's error %q names no option", err)
			}
			if validFactor && validFixed && validTTL && release >= 0 {
				t.Fatalf("New refused valid options: %v", err)
			}
			return
		}
		defer l.Close()
		if !validFactor || !validFixed || !validTTL || release < 0 {
			t.Fatalf("New accepted WithClockDrift(%v, %v), WithDefaultTTL(%v), WithReleaseTimeout(%v)",
				factor, time.Duration(fixed), time.Duration(ttl), time.Duration(release))
		}

		e, err := l.Election("fuzz", WithLeaderTTL(time.Duration(leader)), WithObserveInterval(time.Duration(observe)))
		switch {
		case err != nil && !errors.Is(err, ErrInvalidConfig):
			t.Fatalf("Election: %v, not matching ErrInvalidConfig", err)
		case err != nil && leader >= 0 && time.Duration(leader) <= l.maxTTL() && observe >= 0:
			t.Fatalf("Election refused valid options: %v", err)
		case err == nil && (leader < 0 || time.Duration(leader) > l.maxTTL() || observe < 0):
			t.Fatalf("Election accepted WithLeaderTTL(%v), WithObserveInterval(%v)", time.Duration(leader), time.Duration(observe))
		case err == nil && e.interval <= 0:
			t.Fatalf("observe interval %v", e.interval)
		}

		before := time.Now()
		le, err := l.TryAcquire(context.Background(), "fuzz", WithTTL(time.Duration(acquireTTL)), WithoutAutoRenew())
		if err != nil {
			if !errors.Is(err, ErrInvalidConfig) {
				t.Fatalf("TryAcquire: %v, not matching ErrInvalidConfig", err)
			}
			return
		}
		after := time.Now()
		life := time.Duration(acquireTTL)
		if life == 0 {
			life = l.cfg.ttl
		}
		if dl := le.Deadline(); !dl.After(before) || dl.After(after.Add(life)) {
			t.Fatalf("TTL %v (drift margin %v): deadline %v after the grant, want in (0, %v]",
				life, l.cfg.drift(life), dl.Sub(before), life)
		}
		// A short TTL may run out before Release (no renewal, and a busy
		// machine between the grant and here): Release may then answer
		// that the lease ended, never while its deadline is still ahead.
		if err := le.Release(context.Background()); err != nil {
			if !errors.Is(err, ErrNotHeld) && !errors.Is(err, ErrLost) || time.Now().Before(le.Deadline()) {
				t.Fatalf("Release %v before the deadline (TTL %v): %v", time.Until(le.Deadline()), life, err)
			}
		}
	})
}

// TestOptionErrorsNameTheOption: the refused options' errors say which
// option and value.
func TestOptionErrorsNameTheOption(t *testing.T) {
	d, _ := memlock.NewStore().NewDriver(nil)
	for _, c := range []struct {
		opt  LockerOption
		want string
	}{
		{WithClockDrift(math.NaN(), 0), "WithClockDrift(NaN, 0s)"},
		{WithClockDrift(math.Inf(1), 0), "WithClockDrift(+Inf, 0s)"},
		{WithClockDrift(0.01, math.MaxInt64), "WithClockDrift(0.01, 2562047h47m16.854775807s)"},
		{WithClockDrift(0.01, -time.Millisecond), "WithClockDrift(0.01, -1ms)"},
		{WithDefaultTTL(-time.Second), "WithDefaultTTL(-1s)"},
		{WithDefaultTTL(math.MaxInt64), "WithDefaultTTL(2562047h47m16.854775807s)"},
		{WithReleaseTimeout(-time.Second), "WithReleaseTimeout(-1s)"},
	} {
		_, err := newLocker(d, []LockerOption{c.opt})
		if !errors.Is(err, ErrInvalidConfig) || err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("New with %s: %v, want ErrInvalidConfig naming %s", c.want, err, c.want)
		}
	}
	l := New(d)
	defer l.Close()
	for _, c := range []struct {
		opt  ElectionOption
		want string
	}{
		{WithLeaderTTL(-time.Second), "WithLeaderTTL(-1s)"},
		{WithLeaderTTL(math.MaxInt64), "WithLeaderTTL(2562047h47m16.854775807s)"},
		{WithObserveInterval(-time.Second), "WithObserveInterval(-1s)"},
	} {
		_, err := l.Election("e", c.opt)
		if !errors.Is(err, ErrInvalidConfig) || err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("Election with %s: %v, want ErrInvalidConfig naming %s", c.want, err, c.want)
		}
	}
}
