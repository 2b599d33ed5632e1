package conformance_test

import (
	"context"
	"sync"
	"time"

	"github.com/distlock/distlock/backend"
	"github.com/distlock/distlock/internal/shim"
	"github.com/distlock/distlock/memlock"
)

// brokenSemaphore wraps a memlock driver (under the lossy wrapper) with
// one classic semaphore bug, for brokenDrivers.
type brokenSemaphore struct {
	shim.Notifier
	mem *memlock.Driver
	bug semaphoreBug
}

// largestLimits is the "store" of semLargestLimit: the largest limit
// asked per semaphore key, by any driver (each broken driver runs in a
// process of its own).
var largestLimits struct {
	sync.Mutex
	m map[string]int
}

type semaphoreBug int

const (
	semIgnoresLimit   semaphoreBug = iota // counts nothing: grants whatever the limit
	semRepeatsTokens                      // every grant gets token 1
	semNeverExpires                       // a permit lives 1000×TTL: a crashed holder keeps it
	semGhostOfWaiters                     // a waiter that gave up takes a permit afterwards and never releases it
	semLargestLimit                       // the store keeps the largest limit any asker gave and grants by it
	semClaimsFair                         // declares SemaphoreFair while waiters race for free permits
)

func wrapSemaphore(bug semaphoreBug) func(*memlock.Store, backend.Driver) backend.Driver {
	return func(_ *memlock.Store, d backend.Driver) backend.Driver {
		return &brokenSemaphore{Notifier: shim.Notifier{Driver: d}, mem: d.(*lossy).mem(), bug: bug}
	}
}

func (d *brokenSemaphore) Capabilities() backend.Capabilities {
	c := d.Driver.Capabilities()
	if d.bug == semClaimsFair {
		c.SemaphoreFair = true
	}
	return c
}

func (d *brokenSemaphore) TryAcquire(ctx context.Context, req backend.Request) (backend.Grant, error) {
	if req.Kind != backend.Permits {
		return d.Driver.TryAcquire(ctx, req)
	}
	switch d.bug {
	case semLargestLimit:
		largestLimits.Lock()
		if largestLimits.m == nil {
			largestLimits.m = map[string]int{}
		}
		largestLimits.m[req.Key] = max(largestLimits.m[req.Key], req.Limit)
		req.Limit = largestLimits.m[req.Key]
		largestLimits.Unlock()
	case semIgnoresLimit:
		req.Limit = backend.MaxSemaphoreLimit
	case semNeverExpires:
		req.TTL *= 1000
	}
	g, err := d.mem.TryAcquire(ctx, req)
	switch {
	case err == nil && d.bug == semRepeatsTokens:
		g.Token = 1
	case err != nil && d.bug == semGhostOfWaiters:
		context.AfterFunc(ctx, func() {
			ghost := req
			ghost.Limit = backend.MaxSemaphoreLimit
			ghost.OnLost, ghost.OnDoubt, ghost.OnRestored = nil, nil, nil
			ghost.TTL = max(req.TTL, 2*time.Second)
			_, _ = d.mem.TryAcquire(context.Background(), ghost)
		})
	}
	return g, err
}
