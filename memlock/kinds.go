package memlock

import (
	"context"

	"github.com/distlock/distlock/backend"
	"github.com/distlock/distlock/internal/kinds"
)

var (
	_ backend.Waiter    = (*Driver)(nil)
	_ backend.Notifier  = (*Driver)(nil)
	_ backend.Inspector = (*Driver)(nil)
)

// byKind routes each entry point to the method of the request's kind
// (internal/kinds).
var byKind = kinds.Table[*Driver]{
	Name:             "memlock",
	TryMutex:         (*Driver).tryMutex,
	TryRW:            (*Driver).tryRW,
	TryPermits:       (*Driver).tryPermits,
	SubscribeMutex:   (*Driver).subscribeMutex,
	SubscribeRW:      (*Driver).subscribeRW,
	SubscribePermits: (*Driver).subscribePermits,
	InspectMutex:     (*Driver).inspectMutex,
	InspectRW:        (*Driver).inspectRW,
	InspectPermits:   (*Driver).inspectPermits,
}

// TryAcquire implements backend.Driver for every kind: the mutex, the sides of a
// read-write lock (rwlock.go) and a semaphore's permits (semaphore.go). A kind its Capabilities
// do not declare (in this mode) is refused.
func (d *Driver) TryAcquire(ctx context.Context, req backend.Request) (backend.Grant, error) {
	return byKind.TryAcquire(d, ctx, req)
}

// Subscribe implements backend.Notifier for every kind.
func (d *Driver) Subscribe(ctx context.Context, key string, kind backend.Kind) (<-chan struct{}, func(), error) {
	return byKind.Subscribe(d, ctx, key, kind)
}

// Inspect implements backend.Inspector for every kind.
func (d *Driver) Inspect(ctx context.Context, key string, kind backend.Kind) (backend.Info, error) {
	return byKind.Inspect(d, ctx, key, kind)
}
