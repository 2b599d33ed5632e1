package redislock

import (
	"context"
	"fmt"

	"github.com/distlock/distlock/backend"
	"github.com/distlock/distlock/internal/redisproto"
)

// subscribeMutex implements backend.Notifier over the driver's one shared
// pub/sub connection.
func (d *Driver) subscribeMutex(ctx context.Context, key string) (<-chan struct{}, func(), error) {
	return d.subscribeChannel(ctx, d.keys(key).Channel, fmt.Sprintf("subscribe %q", key))
}

// subscribeChannel subscribes to channel, where a lock's releases are
// announced, over the driver's one shared pub/sub connection; what begins
// its error (`subscribe "key"`).
func (d *Driver) subscribeChannel(ctx context.Context, channel, what string) (<-chan struct{}, func(), error) {
	out := make(chan struct{}, 1)
	cancel, err := d.notify.Subscribe(ctx, channel, out, redisproto.Filter{})
	if err != nil {
		return nil, nil, fmt.Errorf("redislock: %s: %w: %w", what, backend.ErrUnavailable, err)
	}
	return out, cancel, nil
}
