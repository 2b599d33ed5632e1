package sqllock

import (
	"context"

	"github.com/distlock/distlock/backend"
	"github.com/distlock/distlock/internal/kinds"
)

var (
	_ backend.Waiter    = (*Driver)(nil)
	_ backend.Inspector = (*Driver)(nil)
)

// byKind routes each entry point to the method of the request's kind
// (internal/kinds).
var byKind = kinds.Table[*Driver]{
	Name:     "sqllock",
	TryMutex: (*Driver).tryMutex,
	TryRW: func(d *Driver, ctx context.Context, req backend.Request) (backend.Grant, error) {
		return d.tryRW(ctx, req, req.Kind, req.Waiting)
	},
	TryPermits: (*Driver).tryPermits,
	WaitMutex:  (*Driver).waitMutex,
	WaitRW: func(d *Driver, ctx context.Context, req backend.Request) (backend.Grant, error) {
		return d.waitRW(ctx, req, req.Kind)
	},
	InspectMutex: (*Driver).inspectMutex,
}

// sessionKinds routes session mode's entry points: the mutex only.
var sessionKinds = kinds.Table[*Driver]{
	Name: "sqllock",
	TryMutex: func(d *Driver, ctx context.Context, req backend.Request) (backend.Grant, error) {
		return d.sess.tryMutex(ctx, req)
	},
	WaitMutex: func(d *Driver, ctx context.Context, req backend.Request) (backend.Grant, error) {
		return d.sess.waitMutex(ctx, req)
	},
	InspectMutex: func(d *Driver, ctx context.Context, key string) (backend.Info, error) {
		return d.sess.inspectMutex(ctx, key)
	},
}

// TryAcquire implements backend.Driver for the mutex, the sides of a read-write
// lock and a semaphore's permits. A kind its Capabilities
// do not declare (in this mode) is refused.
func (d *Driver) TryAcquire(ctx context.Context, req backend.Request) (backend.Grant, error) {
	if d.sess != nil {
		return sessionKinds.TryAcquire(d, ctx, req)
	}
	return byKind.TryAcquire(d, ctx, req)
}

// Wait implements backend.Waiter for the mutex and the sides of a read-write
// lock.
func (d *Driver) Wait(ctx context.Context, req backend.Request) (backend.Grant, error) {
	if d.sess != nil {
		return sessionKinds.Wait(d, ctx, req)
	}
	return byKind.Wait(d, ctx, req)
}

// Inspect implements backend.Inspector for the mutex.
func (d *Driver) Inspect(ctx context.Context, key string, kind backend.Kind) (backend.Info, error) {
	if d.sess != nil {
		return sessionKinds.Inspect(d, ctx, key, kind)
	}
	return byKind.Inspect(d, ctx, key, kind)
}
