package redislock

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/distlock/distlock/backend"
	"github.com/distlock/distlock/internal/redisproto"
)

// inspectMutex implements backend.Inspector.
func (d *Driver) inspectMutex(ctx context.Context, key string) (backend.Info, error) {
	ks := d.keys(key)
	var h *redis.MapStringStringCmd
	var pttl *redis.DurationCmd
	var fence *redis.StringCmd
	var queued *redis.IntCmd
	var forced *redis.MapStringStringCmd
	_, err := d.c.Pipelined(ctx, func(p redis.Pipeliner) error {
		h = p.HGetAll(ctx, ks.Lock)
		pttl = p.PTTL(ctx, ks.Lock)
		fence = p.Get(ctx, ks.Fence)
		queued = p.ZCard(ctx, ks.Queue)
		forced = p.HGetAll(ctx, ks.ForcedKey())
		return nil
	})
	if err != nil && !errors.Is(err, redis.Nil) {
		return backend.Info{}, fmt.Errorf("redislock: inspect %q: %w: %w", key, backend.ErrUnavailable, err)
	}
	info := infoFrom(key, h.Val(), pttl.Val(), fence.Val())
	info.Forced = redisproto.ForcedFrom(forced.Val())
	if d.opts.Wait == WaitQueue {
		info.Waiters = int(queued.Val()) // may count waiters that died within their liveness window
	}
	return info, nil
}

// infoFrom builds an Info from a lock hash, its PTTL and the counter.
func infoFrom(key string, h map[string]string, pttl time.Duration, fence string) backend.Info {
	info := backend.Info{Key: key, Waiters: -1}
	if owner, ok := h["o"]; ok {
		info.Held, info.Owner, info.Value = true, owner, h["v"]
		info.Token, _ = strconv.ParseUint(h["t"], 10, 64)
		if pttl > 0 {
			info.TTL = pttl
		}
		return info
	}
	info.Token, _ = strconv.ParseUint(fence, 10, 64)
	return info
}

// List implements backend.Inspector: SCAN (on every primary of a Cluster)
// finds the lock hashes under prefix, then each is inspected. A client
// that is neither a *redis.Client nor a *redis.ClusterClient cannot be
// scanned: ErrUnsupported.
func (d *Driver) List(ctx context.Context, prefix string, limit int) ([]backend.Info, error) {
	pattern := redisproto.GlobEscape(d.opts.Prefix+":{"+redisproto.Escaper.Escape(prefix)) + "*}:lock"
	var mu sync.Mutex
	var keys []string
	scan := func(ctx context.Context, c *redis.Client) error {
		it := c.Scan(ctx, 0, pattern, 1000).Iterator()
		for it.Next(ctx) {
			if k, ok := redisproto.KeyOf(d.opts.Prefix, it.Val()); ok {
				mu.Lock()
				keys = append(keys, k)
				mu.Unlock()
			}
		}
		return it.Err()
	}
	var err error
	switch c := d.c.(type) {
	case *redis.Client:
		err = scan(ctx, c)
	case *redis.ClusterClient:
		err = c.ForEachMaster(ctx, scan)
	default:
		return nil, fmt.Errorf("redislock: list: %w: a %T cannot be scanned", backend.ErrUnsupported, d.c)
	}
	if err != nil {
		return nil, fmt.Errorf("redislock: list %q: %w: %w", prefix, errKind(err), err)
	}
	return backend.ListHeld(ctx, d, keys, prefix, limit)
}
