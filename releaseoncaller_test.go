package distlock_test

import (
	"context"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/distlock/distlock"
	"github.com/distlock/distlock/backend"
	"github.com/distlock/distlock/internal/shim"
	"github.com/distlock/distlock/memlock"
)

// stackDriver's locks record, at each Release, whether the caller's
// goroutine made the call (its stack holds the test's release function).
type stackDriver struct {
	shim.Notifier
	onCaller chan bool
}

func (d *stackDriver) TryAcquire(ctx context.Context, req backend.Request) (backend.Grant, error) {
	return tryAcquireThen(ctx, d.Driver, req, func(g *backend.Grant) { g.Lock = &stackLock{Lock: g.Lock, d: d} })
}

type stackLock struct {
	backend.Lock
	d *stackDriver
}

func (l *stackLock) Release(ctx context.Context) error {
	buf := make([]byte, 64<<10)
	l.d.onCaller <- strings.Contains(string(buf[:runtime.Stack(buf, false)]), "releaseFromTest")
	return l.Lock.Release(ctx)
}

//go:noinline
func releaseFromTest(ctx context.Context, le *distlock.Lease) error { return le.Release(ctx) }

// boundedStackDriver is a stackDriver that declares its calls bounded by
// their ctx (backend.Capabilities.CtxBounded).
type boundedStackDriver struct{ *stackDriver }

func (d boundedStackDriver) Capabilities() backend.Capabilities {
	c := d.stackDriver.Capabilities()
	c.CtxBounded = true
	return c
}

// TestReleaseOnCaller: with WithReleaseOnCaller a Release with a ctx that
// can end calls the driver on the caller's goroutine (no hand-off);
// without it, on a goroutine of the Locker's own, so that Release returns
// at the ctx's end whatever the driver does, unless the driver declares
// that it returns by its ctx's end itself (backend.Capabilities.CtxBounded). A ctx that
// cannot end is called on the caller's goroutine either way.
func TestReleaseOnCaller(t *testing.T) {
	for _, tc := range []struct {
		name     string
		opts     []distlock.LockerOption
		cancel   bool
		bounded  bool
		onCaller bool
	}{
		{"default, cancellable ctx", nil, true, false, false},
		{"default, background ctx", nil, false, false, true},
		{"WithReleaseOnCaller, cancellable ctx", []distlock.LockerOption{distlock.WithReleaseOnCaller()}, true, false, true},
		{"CtxBounded driver, cancellable ctx", nil, true, true, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			inner, err := memlock.NewStore().NewDriver(nil)
			if err != nil {
				t.Fatal(err)
			}
			d := &stackDriver{Notifier: shim.Notifier{Driver: inner}, onCaller: make(chan bool, 1)}
			var drv backend.Driver = d
			if tc.bounded {
				drv = boundedStackDriver{d}
			}
			l := distlock.New(drv, tc.opts...)
			defer l.Close()
			ctx := context.Background()
			if tc.cancel {
				var cancel context.CancelFunc
				ctx, cancel = context.WithTimeout(ctx, time.Hour)
				defer cancel()
			}
			le, err := l.Acquire(ctx, "k")
			if err != nil {
				t.Fatal(err)
			}
			if err := releaseFromTest(ctx, le); err != nil {
				t.Fatal(err)
			}
			if got := <-d.onCaller; got != tc.onCaller {
				t.Errorf("driver's Release on the caller's goroutine = %v, want %v", got, tc.onCaller)
			}
		})
	}
}
