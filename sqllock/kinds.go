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
	Name:         "sqllock",
	TryMutex:     (*Driver).tryMutex,
	TryRW:        kinds.TrySide((*Driver).tryRW),
	TryPermits:   (*Driver).tryPermits,
	WaitMutex:    (*Driver).waitMutex,
	WaitRW:       kinds.WaitSide((*Driver).waitRW),
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

// routes gives Driver its entry points through byKind, or in session mode
// through sessionKinds (set by New): TryAcquire (a kind its Capabilities
// do not declare, in this mode, is refused), Wait for the mutex and the
// sides of a read-write lock, and Inspect for the mutex.
type routes = kinds.Waiting[*Driver]
