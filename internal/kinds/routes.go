package kinds

import (
	"context"

	"github.com/distlock/distlock/backend"
)

// Routes gives a driver that embeds it (through an unexported alias, so
// that the field stays unexported) its entry points, which forward to the
// Table the Routes was made of: TryAcquire (backend.Driver) and Inspect
// (backend.Inspector). Waiting, Notifying and WaitingNotifying add Wait
// (backend.Waiter), Subscribe (backend.Notifier) or both, so that a
// driver's method set declares only the interfaces it serves:
//
//	type routes = kinds.Waiting[*Driver] // in the driver's kinds.go
//
//	type Driver struct {
//		routes // TryAcquire, Wait, Inspect through byKind (kinds.go)
//		...
//	}
//
//	d := &Driver{...}
//	d.routes = byKind.Waiting(d)
//
// A driver whose mode changes the table (sqllock's session mode) sets its
// Routes again from the mode's table.
type Routes[D Driver] struct {
	d D
	t *Table[D]
}

// Waiting is Routes with Wait.
type Waiting[D Driver] struct{ Routes[D] }

// Notifying is Routes with Subscribe.
type Notifying[D Driver] struct{ Routes[D] }

// WaitingNotifying is Routes with Wait and Subscribe.
type WaitingNotifying[D Driver] struct{ Routes[D] }

// Waiting returns d's Waiting routes through t.
func (t *Table[D]) Waiting(d D) Waiting[D] { return Waiting[D]{Routes[D]{d, t}} }

// Notifying returns d's Notifying routes through t.
func (t *Table[D]) Notifying(d D) Notifying[D] { return Notifying[D]{Routes[D]{d, t}} }

// WaitingNotifying returns d's WaitingNotifying routes through t.
func (t *Table[D]) WaitingNotifying(d D) WaitingNotifying[D] {
	return WaitingNotifying[D]{Routes[D]{d, t}}
}

// TryAcquire implements backend.Driver for the kinds the table has a
// method for: a kind the driver's Capabilities do not declare (in its
// current mode) is refused (Table.TryAcquire).
func (r Routes[D]) TryAcquire(ctx context.Context, req backend.Request) (backend.Grant, error) {
	return r.t.TryAcquire(r.d, ctx, req)
}

// Inspect implements backend.Inspector for the kinds the table has a
// method for.
func (r Routes[D]) Inspect(ctx context.Context, key string, kind backend.Kind) (backend.Info, error) {
	return r.t.Inspect(r.d, ctx, key, kind)
}

// Wait implements backend.Waiter for the kinds the table has a method for.
func (w Waiting[D]) Wait(ctx context.Context, req backend.Request) (backend.Grant, error) {
	return w.t.Wait(w.d, ctx, req)
}

// Subscribe implements backend.Notifier for the kinds the table has a
// method for.
func (n Notifying[D]) Subscribe(ctx context.Context, key string, kind backend.Kind) (<-chan struct{}, func(), error) {
	return n.t.Subscribe(n.d, ctx, key, kind)
}

// Wait implements backend.Waiter for the kinds the table has a method for.
func (w WaitingNotifying[D]) Wait(ctx context.Context, req backend.Request) (backend.Grant, error) {
	return w.t.Wait(w.d, ctx, req)
}

// Subscribe implements backend.Notifier for the kinds the table has a
// method for.
func (w WaitingNotifying[D]) Subscribe(ctx context.Context, key string, kind backend.Kind) (<-chan struct{}, func(), error) {
	return w.t.Subscribe(w.d, ctx, key, kind)
}
