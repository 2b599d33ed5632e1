package memlock_test

import (
	"context"
	"fmt"
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
	// drained: the store is the case's own, and Close checks it is empty
	// once the locks given up while it was unreachable have expired.
	drained bool
}

func (h *harness) NewDriver(context.Context) (backend.Driver, error) {
	return h.s.NewDriver(&memlock.Options{Wait: h.wait})
}
func (h *harness) TTL() time.Duration { return 500 * time.Millisecond }
func (h *harness) Kill(_ context.Context, d backend.Driver) error {
	return onMem(d, func(md *memlock.Driver) { md.Kill() })
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
	return onMem(d, func(md *memlock.Driver) { md.Partition(0) })
}

func (h *harness) Heal(_ context.Context, d backend.Driver) error {
	return onMem(d, func(md *memlock.Driver) { md.Heal() })
}

// DropNextReply and Dropped are the driver's own (conformance.ReplyDropper).
func (h *harness) DropNextReply(_ context.Context, d backend.Driver) error {
	return onMem(d, func(md *memlock.Driver) { md.DropNextReply() })
}

func (h *harness) Dropped(d backend.Driver) int {
	md, err := asMem(d)
	if err != nil {
		return 0
	}
	return md.Dropped()
}

// onMem runs f on d's memlock driver (asMem), or returns asMem's error.
func onMem(d backend.Driver, f func(*memlock.Driver)) error {
	md, err := asMem(d)
	if err != nil {
		return err
	}
	f(md)
	return nil
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

func (h *harness) Close() error {
	if !h.drained {
		return nil
	}
	deadline := time.Now().Add(2 * time.Second)
	for h.s.Len() != 0 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if n := h.s.Len(); n != 0 {
		return fmt.Errorf("after the case the store still has state for %d keys: %q", n, h.s.Keys())
	}
	return nil
}

// TestConformance runs the suite for each wait kind with every case in a
// synctest bubble (conformance.VirtualTime), a store each: the TTL rules at
// their exact instants, whatever else the machine's cores are doing. (In
// real time, with a 500 ms TTL, a CPU hog beside the race detector held the
// watchdog back long enough to fail WatchdogRenews and MultiLockOneStep;
// the server-backed stores run the suite in real time.)
func TestConformance(t *testing.T) {
	for _, wait := range []backend.WaitKind{backend.WaitNotify, backend.WaitQueue, backend.WaitPoll} {
		t.Run(string(wait), func(t *testing.T) {
			conformance.Run(t, func(context.Context, *testing.T) (conformance.Harness, error) {
				return &harness{s: memlock.NewStore(), wait: wait, drained: true}, nil
			}, conformance.VirtualTime(), conformance.Parallel(8))
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
