package redlock

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/distlock/distlock/backend"
	"github.com/distlock/distlock/internal/redisproto"
)

var _ backend.Inspector = (*Driver)(nil)

// Inspect implements backend.Inspector: it answers ErrUnsupported
// (Capabilities.Inspect false). The nodes' votes name no single holder to
// report: each node may hold the key for a different owner, or for one
// that won no majority.
func (r *Driver) Inspect(_ context.Context, key string, kind backend.Kind) (backend.Info, error) {
	return backend.Info{}, fmt.Errorf("redlock: inspect %q (%s): %w: the nodes' votes name no single holder", key, kind, backend.ErrUnsupported)
}

// List implements backend.Inspector: it answers ErrUnsupported, as
// Inspect does.
func (r *Driver) List(context.Context, string, int) ([]backend.Info, error) {
	return nil, fmt.Errorf("redlock: list: %w: the nodes' votes name no single holder", backend.ErrUnsupported)
}

// ForceRelease implements backend.Inspector on every node. It succeeds when
// the lock is gone from a majority of nodes (no one can hold it then, and
// no majority can renew it); a node that did not answer keeps the lock
// until its TTL, which no quorum can extend.
func (r *Driver) ForceRelease(ctx context.Context, key string, f backend.Forced) (backend.Info, error) {
	type res struct {
		owner string
		token uint64
		held  bool
	}
	ks := r.keys(key)
	vals, errs := eachNode(r, ctx, 10*time.Second, func(ctx context.Context, _ int, n *node) (res, error) {
		o, t, held, err := redisproto.ForceOn(ctx, n.c, ks, f)
		return res{o, t, held}, err
	})
	info := backend.Info{Key: key, Waiters: -1}
	answered := 0
	for i, v := range vals {
		if errs[i] != nil {
			continue
		}
		answered++
		if v.held {
			info.Held, info.Owner = true, v.owner
			info.Token = max(info.Token, v.token)
		}
	}
	if answered < r.quorum {
		return info, fmt.Errorf("redlock: force release %q: %w: %d of %d nodes answered, %d needed: %w", key, backend.ErrUnavailable, answered, len(r.nodes), r.quorum, errors.Join(errs...))
	}
	if !info.Held {
		return info, fmt.Errorf("redlock: force release %q: %w: the lock is free", key, backend.ErrNotHeld)
	}
	return info, nil
}
