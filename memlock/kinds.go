package memlock

import (
	"context"

	"github.com/distlock/distlock/backend"
)

var (
	_ backend.Waiter     = (*Driver)(nil)
	_ backend.Notifier   = (*Driver)(nil)
	_ backend.Withdrawer = (*Driver)(nil)
	_ backend.Inspector  = (*Driver)(nil)
)

// TryAcquire implements backend.Driver for every kind: the mutex, the
// sides of a read-write lock (rwlock.go) and a semaphore's permits
// (semaphore.go).
// A kind its Capabilities do not declare (in this mode) is refused.
func (d *Driver) TryAcquire(ctx context.Context, req backend.Request) (backend.Grant, error) {
	if req.Kind != backend.Exclusive && d.Capabilities().WaitFor(req.Kind) == "" {
		return backend.Grant{}, backend.UnsupportedKind("memlock", "acquire", req.Kind)
	}
	switch req.Kind {
	case backend.Exclusive:
		return d.tryMutex(ctx, req)
	case backend.Read, backend.Write:
		return d.tryRW(ctx, req)
	case backend.Permits:
		return d.tryPermits(ctx, req)
	}
	return backend.Grant{}, backend.UnsupportedKind("memlock", "acquire", req.Kind)
}

// Subscribe implements backend.Notifier for every kind.
func (d *Driver) Subscribe(ctx context.Context, key string, kind backend.Kind) (<-chan struct{}, func(), error) {
	switch kind {
	case backend.Exclusive:
		return d.subscribeMutex(ctx, key)
	case backend.Read, backend.Write:
		return d.subscribeRW(ctx, key)
	case backend.Permits:
		return d.subscribePermits(ctx, key)
	}
	return nil, nil, backend.UnsupportedKind("memlock", "subscribe", kind)
}

// Inspect implements backend.Inspector for every kind.
func (d *Driver) Inspect(ctx context.Context, key string, kind backend.Kind) (backend.Info, error) {
	switch kind {
	case backend.Exclusive:
		return d.inspectMutex(ctx, key)
	case backend.Read, backend.Write:
		return d.inspectRW(ctx, key)
	case backend.Permits:
		return d.inspectPermits(ctx, key)
	}
	return backend.Info{}, backend.UnsupportedKind("memlock", "inspect", kind)
}
