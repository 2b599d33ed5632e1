package sqllock

import (
	"context"

	"github.com/distlock/distlock/backend"
)

var (
	_ backend.Waiter    = (*Driver)(nil)
	_ backend.Inspector = (*Driver)(nil)
)

// TryAcquire implements backend.Driver for the mutex, the sides of a read-
// write lock and a semaphore's permits. A kind its Capabilities do not
// declare (in this mode) is refused.
func (d *Driver) TryAcquire(ctx context.Context, req backend.Request) (backend.Grant, error) {
	if req.Kind != backend.Exclusive && d.Capabilities().WaitFor(req.Kind) == "" {
		return backend.Grant{}, backend.UnsupportedKind("sqllock", "acquire", req.Kind)
	}
	switch req.Kind {
	case backend.Exclusive:
		return d.tryMutex(ctx, req)
	case backend.Read, backend.Write:
		return d.tryRW(ctx, req, req.Kind, req.Waiting)
	case backend.Permits:
		return d.tryPermits(ctx, req)
	}
	return backend.Grant{}, backend.UnsupportedKind("sqllock", "acquire", req.Kind)
}

// Wait implements backend.Waiter for the mutex and the sides of a read-
// write lock.
func (d *Driver) Wait(ctx context.Context, req backend.Request) (backend.Grant, error) {
	switch req.Kind {
	case backend.Exclusive:
		return d.waitMutex(ctx, req)
	case backend.Read, backend.Write:
		return d.waitRW(ctx, req, req.Kind)
	}
	return backend.Grant{}, backend.UnsupportedKind("sqllock", "wait", req.Kind)
}

// Inspect implements backend.Inspector for the mutex.
func (d *Driver) Inspect(ctx context.Context, key string, kind backend.Kind) (backend.Info, error) {
	switch kind {
	case backend.Exclusive:
		return d.inspectMutex(ctx, key)
	}
	return backend.Info{}, backend.UnsupportedKind("sqllock", "inspect", kind)
}
