package distlock_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/distlock/distlock"
	"github.com/distlock/distlock/backend"
	"github.com/distlock/distlock/memlock"
)

// refusingDriver refuses every acquisition with err, in its TryAcquire
// (the portable retry loop) and, with queue set, in its Wait (the store's
// queue).
type refusingDriver struct {
	backend.Driver
	err   error
	calls int
}

func (d *refusingDriver) TryAcquire(context.Context, backend.Request) (backend.Grant, error) {
	d.calls++
	return backend.Grant{}, d.err
}

// Capabilities says wait=poll: the portable retry loop waits.
func (d *refusingDriver) Capabilities() backend.Capabilities {
	return d.Driver.Capabilities().Polled()
}

type refusingQueue struct{ *refusingDriver }

// Capabilities says wait=queue: the store's queue waits.
func (d refusingQueue) Capabilities() backend.Capabilities {
	c := d.Driver.Capabilities().Polled()
	c.Wait = backend.WaitQueue
	return c
}

func (d refusingQueue) Wait(context.Context, backend.Request) (backend.Grant, error) {
	d.calls++
	return backend.Grant{}, d.err
}

// A wait ends at the first error no retry fixes, even one that also
// matches ErrUnavailable (a Redlock whose nodes failed in different ways,
// some refusing the login): the configuration error wins, in the retry
// loop and in the store's queue.
func TestWaitEndsOnPermanentError(t *testing.T) {
	for _, perm := range []error{backend.ErrInvalidConfig, backend.ErrInvalidKey, backend.ErrUnsupported} {
		mixed := fmt.Errorf("node a: %w: x; node b: %w: WRONGPASS", backend.ErrUnavailable, perm)
		for _, queue := range []bool{false, true} {
			t.Run(fmt.Sprintf("%v/queue=%v", perm, queue), func(t *testing.T) {
				mem, _ := memlock.NewStore().NewDriver(nil)
				rd := &refusingDriver{Driver: mem, err: mixed}
				var d backend.Driver = rd
				if queue {
					d = refusingQueue{rd}
				}
				l := distlock.New(d)
				defer l.Close()
				ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
				defer cancel()
				_, err := l.Acquire(ctx, "k")
				if !errors.Is(err, perm) {
					t.Fatalf("Acquire: %v, want %v", err, perm)
				}
				if ctx.Err() != nil || rd.calls != 1 {
					t.Errorf("Acquire made %d attempts (ctx %v): it retried an error no retry fixes", rd.calls, ctx.Err())
				}
			})
		}
	}
}
