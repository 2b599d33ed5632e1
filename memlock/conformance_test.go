package memlock_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/distlock/distlock/backend"
	"github.com/distlock/distlock/conformance"
	"github.com/distlock/distlock/internal/hooktest"
	"github.com/distlock/distlock/internal/insptest"
	"github.com/distlock/distlock/memlock"
)

type harness struct {
	s    *memlock.Store
	wait backend.WaitKind
}

func (h *harness) NewDriver(context.Context) (backend.Driver, error) {
	return h.s.NewDriver(&memlock.Options{Wait: h.wait})
}
func (h *harness) TTL() time.Duration { return 500 * time.Millisecond }
func (h *harness) Kill(_ context.Context, d backend.Driver) error {
	md, err := asMem(d)
	if err != nil {
		return err
	}
	md.Kill()
	return nil
}

// userDriver is a driver over a "user-made client": one that ignores ctx.
// memlock has no client of its own to build the way a service would, so
// the profile is the behaviour such a client has under a stalled store:
// Partition stalls it (memlock.Driver.Stall: its calls block until Heal
// whatever their ctx, and no doubt is pushed), as a TCP black hole does to
// go-redis without ContextTimeoutEnabled.
type userDriver struct{ *memlock.Driver }

// NewUserDriver implements conformance.UserClients.
func (h *harness) NewUserDriver(context.Context) (backend.Driver, error) {
	d, err := h.s.NewDriver(&memlock.Options{Wait: h.wait})
	if err != nil {
		return nil, err
	}
	return userDriver{d}, nil
}
func (h *harness) Delete(_ context.Context, key string) error { h.s.Delete(key); return nil }

// Partition and Heal are the driver's own (conformance.Partitioner): calls
// fail as unavailable while its locks keep expiring in the store, and its
// locks are reported in doubt at once, vouched for until the expiry the
// store last confirmed.
func (h *harness) Partition(_ context.Context, d backend.Driver) error {
	if ud, ok := d.(userDriver); ok {
		ud.Stall()
		return nil
	}
	md, err := asMem(d)
	if err != nil {
		return err
	}
	md.Partition(0)
	return nil
}

func (h *harness) Heal(_ context.Context, d backend.Driver) error {
	md, err := asMem(d)
	if err != nil {
		return err
	}
	md.Heal()
	return nil
}

// DropNextReply and Dropped are the driver's own (conformance.ReplyDropper).
func (h *harness) DropNextReply(_ context.Context, d backend.Driver) error {
	md, err := asMem(d)
	if err != nil {
		return err
	}
	md.DropNextReply()
	return nil
}

func (h *harness) Dropped(d backend.Driver) int {
	md, err := asMem(d)
	if err != nil {
		return 0
	}
	return md.Dropped()
}

func asMem(d backend.Driver) (*memlock.Driver, error) {
	if ud, ok := d.(userDriver); ok {
		return ud.Driver, nil
	}
	md, ok := d.(*memlock.Driver)
	if !ok {
		return nil, fmt.Errorf("not a memlock driver: %T", d)
	}
	return md, nil
}
func (h *harness) StopServer(context.Context) error  { h.s.SetAvailable(false); return nil }
func (h *harness) StartServer(context.Context) error { h.s.SetAvailable(true); return nil }
func (h *harness) Close() error                      { return nil }

func TestConformance(t *testing.T) {
	// The three wait kinds at once, a store each (t.Run from goroutines:
	// t.Parallel would run only GOMAXPROCS of them at a time).
	var wg sync.WaitGroup
	defer wg.Wait()
	for _, wait := range []backend.WaitKind{backend.WaitNotify, backend.WaitQueue, backend.WaitPoll} {
		wg.Go(func() {
			t.Run(string(wait), func(t *testing.T) {
				s := memlock.NewStore()
				conformance.Run(t, func(context.Context, *testing.T) (conformance.Harness, error) {
					return &harness{s: s, wait: wait}, nil
				}, conformance.Parallel(8))
				// Locks given up while the store was unreachable expire by their TTL.
				deadline := time.Now().Add(2 * time.Second)
				for s.Len() != 0 && time.Now().Before(deadline) {
					time.Sleep(10 * time.Millisecond)
				}
				if n := s.Len(); n != 0 {
					t.Errorf("after the suite the store still has state for %d keys: %q", n, s.Keys())
				}
			})
		})
	}
}

// TestHarnessHooks checks the harness's Partitioner and ReplyDropper.
func TestHarnessHooks(t *testing.T) {
	hooktest.Run(t, &harness{s: memlock.NewStore(), wait: backend.WaitNotify})
}

// TestInspectors checks InspectSemaphore and InspectRW against grants.
func TestInspectors(t *testing.T) {
	insptest.Run(t, &harness{s: memlock.NewStore(), wait: backend.WaitNotify})
}
