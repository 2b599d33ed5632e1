// Package kinds routes a driver's one entry point per operation
// (TryAcquire, Wait, Subscribe, Inspect), which serves every Kind of
// backend.Request, to the driver's own method for each family of kinds:
// the mutex (Exclusive), a read-write lock's sides (Read, Write) and a
// semaphore's permits (Permits). What every driver's dispatch shares is
// written here once: the refusal of a kind the driver's Capabilities do
// not declare (in its current mode), and of a family it has no method
// for, with backend.UnsupportedKind.
//
// A driver fills one Table with method expressions (no allocation per
// call) and embeds the table's Routes (routes.go), whose methods are its
// entry points:
//
//	var byKind = kinds.Table[*Driver]{Name: "etcdlock", TryMutex: (*Driver).tryMutex, ...}
//
//	d.routes = byKind.Waiting(d) // TryAcquire, Wait, Inspect
package kinds

import (
	"context"

	"github.com/distlock/distlock/backend"
)

// Acquirer is a driver's method that takes (or waits for) a grant of a
// request.
type Acquirer[D any] func(d D, ctx context.Context, req backend.Request) (backend.Grant, error)

// Subscriber is a driver's method that subscribes to the releases of key.
type Subscriber[D any] func(d D, ctx context.Context, key string) (<-chan struct{}, func(), error)

// InspectFunc is a driver's method that reports key's state.
type InspectFunc[D any] func(d D, ctx context.Context, key string) (backend.Info, error)

// Driver is what a Table needs of a driver: its Capabilities, which say
// the kinds it declares in its current mode.
type Driver interface{ Capabilities() backend.Capabilities }

// Table holds a driver's methods by family of kinds; a nil one is a
// family the driver does not serve in that operation.
type Table[D Driver] struct {
	// Name is the driver's name in errors ("etcdlock").
	Name string

	TryMutex, TryRW, TryPermits                   Acquirer[D]
	WaitMutex, WaitRW, WaitPermits                Acquirer[D]
	SubscribeMutex, SubscribeRW, SubscribePermits Subscriber[D]
	InspectMutex, InspectRW, InspectPermits       InspectFunc[D]
}

// family returns mutex, rw or permits as k's family is; ok is false for a
// kind of none.
func family[F any](k backend.Kind, mutex, rw, permits F) (f F, ok bool) {
	switch k {
	case backend.Exclusive:
		return mutex, true
	case backend.Read, backend.Write:
		return rw, true
	case backend.Permits:
		return permits, true
	}
	return f, false
}

// TryAcquire is d's backend.Driver.TryAcquire: a kind other than the
// mutex that d's Capabilities do not declare (in this mode) is refused,
// so that a caller that skips the portable layer's check is never granted
// a kind the driver does not stand behind.
func (t *Table[D]) TryAcquire(d D, ctx context.Context, req backend.Request) (backend.Grant, error) {
	if req.Kind != backend.Exclusive && d.Capabilities().WaitFor(req.Kind) == "" {
		return backend.Grant{}, backend.UnsupportedKind(t.Name, "acquire", req.Kind)
	}
	if f, ok := family(req.Kind, t.TryMutex, t.TryRW, t.TryPermits); ok && f != nil {
		return f(d, ctx, req)
	}
	return backend.Grant{}, backend.UnsupportedKind(t.Name, "acquire", req.Kind)
}

// Wait is d's backend.Waiter.Wait.
func (t *Table[D]) Wait(d D, ctx context.Context, req backend.Request) (backend.Grant, error) {
	if f, ok := family(req.Kind, t.WaitMutex, t.WaitRW, t.WaitPermits); ok && f != nil {
		return f(d, ctx, req)
	}
	return backend.Grant{}, backend.UnsupportedKind(t.Name, "wait", req.Kind)
}

// Subscribe is d's backend.Notifier.Subscribe.
func (t *Table[D]) Subscribe(d D, ctx context.Context, key string, kind backend.Kind) (<-chan struct{}, func(), error) {
	if f, ok := family(kind, t.SubscribeMutex, t.SubscribeRW, t.SubscribePermits); ok && f != nil {
		return f(d, ctx, key)
	}
	return nil, nil, backend.UnsupportedKind(t.Name, "subscribe", kind)
}

// Inspect is d's backend.Inspector.Inspect.
func (t *Table[D]) Inspect(d D, ctx context.Context, key string, kind backend.Kind) (backend.Info, error) {
	if f, ok := family(kind, t.InspectMutex, t.InspectRW, t.InspectPermits); ok && f != nil {
		return f(d, ctx, key)
	}
	return backend.Info{}, backend.UnsupportedKind(t.Name, "inspect", kind)
}

// TrySide adapts a driver's read-write try that takes the side (Read or
// Write: req.Kind) and the writer-waiting mark (req.Waiting) as arguments
// of their own to a Table's TryRW.
func TrySide[D any](f func(d D, ctx context.Context, req backend.Request, side backend.Kind, waiting bool) (backend.Grant, error)) Acquirer[D] {
	return func(d D, ctx context.Context, req backend.Request) (backend.Grant, error) {
		return f(d, ctx, req, req.Kind, req.Waiting)
	}
}

// WaitSide adapts a driver's read-write wait that takes the side (req.Kind)
// as an argument of its own to a Table's WaitRW.
func WaitSide[D any](f func(d D, ctx context.Context, req backend.Request, side backend.Kind) (backend.Grant, error)) Acquirer[D] {
	return func(d D, ctx context.Context, req backend.Request) (backend.Grant, error) {
		return f(d, ctx, req, req.Kind)
	}
}
