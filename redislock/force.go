package redislock

import (
	"context"
	"fmt"

	"github.com/distlock/distlock/backend"
	"github.com/distlock/distlock/internal/redisproto"
)

// ForceRelease implements backend.Inspector.
func (d *Driver) ForceRelease(ctx context.Context, key string, f backend.Forced) (backend.Info, error) {
	owner, token, held, err := redisproto.ForceOn(ctx, d.c, d.keys(key), f)
	if err != nil {
		return backend.Info{}, fmt.Errorf("redislock: force release %q: %w: %w", key, errKind(err), err)
	}
	if !held {
		return backend.Info{Key: key, Waiters: -1}, fmt.Errorf("redislock: force release %q: %w: the lock is free", key, backend.ErrNotHeld)
	}
	return backend.Info{Key: key, Held: true, Owner: owner, Token: token, Waiters: -1}, nil
}
