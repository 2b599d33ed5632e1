package etcdlock

import (
	"context"
	"errors"
	"fmt"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	"google.golang.org/grpc/connectivity"

	"github.com/distlock/distlock/backend"
)

// errSessionLost is the cause given when the driver's lease ended.
var errSessionLost = errors.New("etcdlock: the driver's lease ended")

// wrap gives err from an etcd call made with ctx its backend kind:
// ctx's own error when ctx ended (and ErrUnavailable too when its deadline
// passed while the client had no connection: the etcd client waits for one
// rather than failing, so an unreachable cluster shows up this way),
// ErrClosed when the client is closed, ErrNotHeld for a lease the server
// no longer has, ErrUnavailable else.
func (d *Driver) wrap(ctx context.Context, op, key string, err error) error {
	switch {
	case errors.Is(ctx.Err(), context.DeadlineExceeded) && !d.connected():
		return fmt.Errorf("etcdlock: %s %q: %w: no connection to the cluster: %w (%w)", op, key, backend.ErrUnavailable, context.Cause(ctx), err)
	case ctx.Err() != nil:
		return fmt.Errorf("etcdlock: %s %q: %w (%w)", op, key, context.Cause(ctx), err)
	case d.c.Ctx().Err() != nil || d.ctx.Err() != nil:
		return fmt.Errorf("etcdlock: %s %q: %w: %w", op, key, backend.ErrClosed, err)
	case errors.Is(err, rpctypes.ErrLeaseNotFound):
		return fmt.Errorf("etcdlock: %s %q: %w: %w", op, key, backend.ErrNotHeld, err)
	default:
		return fmt.Errorf("etcdlock: %s %q: %w: %w", op, key, backend.ErrUnavailable, err)
	}
}

// connected reports whether the client's connection is ready.
func (d *Driver) connected() bool {
	return d.c.ActiveConnection().GetState() == connectivity.Ready
}
