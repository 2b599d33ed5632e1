package etcdlock

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
	Name:     "etcdlock",
	TryMutex: (*Driver).tryMutex,
	TryRW: func(d *Driver, ctx context.Context, req backend.Request) (backend.Grant, error) {
		return d.tryRW(ctx, req, req.Kind, req.Waiting)
	},
	TryPermits: (*Driver).tryPermits,
	WaitMutex:  (*Driver).waitMutex,
	WaitRW: func(d *Driver, ctx context.Context, req backend.Request) (backend.Grant, error) {
		return d.waitRW(ctx, req, req.Kind)
	},
	WaitPermits:    (*Driver).waitPermits,
	InspectMutex:   (*Driver).inspectMutex,
	InspectRW:      (*Driver).inspectRW,
	InspectPermits: (*Driver).inspectPermits,
}

// TryAcquire implements backend.Driver for the mutex, the sides of a read-write
// lock and a semaphore's permits. A kind its Capabilities
// do not declare (in this mode) is refused.
func (d *Driver) TryAcquire(ctx context.Context, req backend.Request) (backend.Grant, error) {
	return byKind.TryAcquire(d, ctx, req)
}

// Wait implements backend.Waiter for the mutex, the sides of a read-write
// lock and a semaphore's permits.
func (d *Driver) Wait(ctx context.Context, req backend.Request) (backend.Grant, error) {
	return byKind.Wait(d, ctx, req)
}

// Inspect implements backend.Inspector for the mutex, the sides of a read-write
// lock and a semaphore's permits.
func (d *Driver) Inspect(ctx context.Context, key string, kind backend.Kind) (backend.Info, error) {
	return byKind.Inspect(d, ctx, key, kind)
}
