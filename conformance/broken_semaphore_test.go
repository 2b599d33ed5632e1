package conformance_test

import (
	"context"
	"time"

	"github.com/distlock/distlock/backend"
	"github.com/distlock/distlock/memlock"
)

// brokenSemaphore wraps a memlock driver (under the lossy wrapper) with
// one classic semaphore bug, for brokenDrivers.
type brokenSemaphore struct {
	backend.Driver
	mem *memlock.Driver
	bug semaphoreBug
}

type semaphoreBug int

const (
	semIgnoresLimit   semaphoreBug = iota // counts nothing: grants whatever the limit
	semRepeatsTokens                      // every grant gets token 1
	semNeverExpires                       // a permit lives 1000×TTL: a crashed holder keeps it
	semGhostOfWaiters                     // a waiter that gave up takes a permit afterwards and never releases it
)

func wrapSemaphore(bug semaphoreBug) func(*memlock.Store, backend.Driver) backend.Driver {
	return func(_ *memlock.Store, d backend.Driver) backend.Driver {
		return &brokenSemaphore{Driver: d, mem: d.(*lossy).mem(), bug: bug}
	}
}

func (d *brokenSemaphore) Subscribe(ctx context.Context, key string) (<-chan struct{}, func(), error) {
	return d.Driver.(backend.Notifier).Subscribe(ctx, key)
}

func (d *brokenSemaphore) SubscribePermits(ctx context.Context, key string) (<-chan struct{}, func(), error) {
	return d.mem.SubscribePermits(ctx, key)
}

func (d *brokenSemaphore) TryAcquirePermits(ctx context.Context, req backend.SemaphoreRequest) (backend.Grant, error) {
	switch d.bug {
	case semIgnoresLimit:
		req.Limit = backend.MaxSemaphoreLimit
	case semNeverExpires:
		req.TTL *= 1000
	}
	g, err := d.mem.TryAcquirePermits(ctx, req)
	switch {
	case err == nil && d.bug == semRepeatsTokens:
		g.Token = 1
	case err != nil && d.bug == semGhostOfWaiters:
		context.AfterFunc(ctx, func() {
			ghost := req
			ghost.Limit = backend.MaxSemaphoreLimit
			ghost.OnLost, ghost.OnDoubt, ghost.OnRestored = nil, nil, nil
			ghost.TTL = max(req.TTL, 2*time.Second)
			_, _ = d.mem.TryAcquirePermits(context.Background(), ghost)
		})
	}
	return g, err
}
