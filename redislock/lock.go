package redislock

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/distlock/distlock/backend"
)

// lock is a lock held on one Redis deployment.
type lock struct {
	d     *Driver
	key   string
	ks    keyset
	owner string
}

// Release implements backend.Lock: it lowers the owner's hold count and
// deletes the lock (announcing it) when the count reaches zero.
func (l *lock) Release(ctx context.Context) error {
	n, err := releaseScript.Run(ctx, l.d.c, l.ks.releaseKeys(), l.owner, l.ks.channel, "release").Int64()
	if err != nil {
		l.d.suspect(err)
		return fmt.Errorf("redislock: release %q: %w: %w", l.key, backend.ErrUnavailable, err)
	}
	if n < 0 {
		return fmt.Errorf("redislock: release %q: %w", l.key, backend.ErrNotHeld)
	}
	return nil
}

// Refresh implements backend.Lock.
func (l *lock) Refresh(ctx context.Context, ttl time.Duration) error {
	n, err := refreshScript.Run(ctx, l.d.c, []string{l.ks.lock}, l.owner, millis(ttl)).Int64()
	l.d.suspect(err)
	return refreshResult(l.key, n, err)
}

func refreshResult(key string, n int64, err error) error {
	if err != nil {
		return fmt.Errorf("redislock: refresh %q: %w: %w", key, backend.ErrUnavailable, err)
	}
	if n != 1 {
		return fmt.Errorf("redislock: refresh %q: %w", key, backend.ErrNotHeld)
	}
	return nil
}

// RefreshAll implements backend.BatchRefresher: every refresh goes out in
// one pipeline (one round trip per Cluster node).
func (d *Driver) RefreshAll(ctx context.Context, locks []backend.Lock, ttls []time.Duration) []error {
	errs := make([]error, len(locks))
	mine := make([]*lock, len(locks))
	for i, bl := range locks {
		l, ok := bl.(*lock)
		if !ok || l.d != d {
			errs[i] = fmt.Errorf("redislock: refresh: %w: lock %T is not from this driver", backend.ErrInvalidConfig, bl)
			continue
		}
		mine[i] = l
	}
	cmds, err := pipelineScript(ctx, d.c, refreshScript, len(locks), func(i int) ([]string, []any, bool) {
		if mine[i] == nil {
			return nil, nil, false
		}
		return []string{mine[i].ks.lock}, []any{mine[i].owner, millis(ttls[i])}, true
	})
	for i, l := range mine {
		if l == nil {
			continue
		}
		if cmds[i] == nil {
			errs[i] = refreshResult(l.key, 0, err)
			continue
		}
		n, cerr := cmds[i].Int64()
		d.suspect(cerr)
		errs[i] = refreshResult(l.key, n, cerr)
	}
	return errs
}

// pipelineScript runs script n times in one pipeline, with the keys and
// args that call(i) gives (skipping i when it returns false). If Redis lost
// its script cache, it loads the script and runs the pipeline once more.
// cmds[i] is nil where nothing ran; err is the pipeline's transport error.
func pipelineScript(ctx context.Context, c redis.UniversalClient, s *redis.Script, n int, call func(int) ([]string, []any, bool)) ([]*redis.Cmd, error) {
	cmds := make([]*redis.Cmd, n)
	run := func() error {
		_, err := c.Pipelined(ctx, func(p redis.Pipeliner) error {
			for i := range n {
				if keys, args, ok := call(i); ok {
					cmds[i] = s.EvalSha(ctx, p, keys, args...)
				}
			}
			return nil
		})
		return err
	}
	err := run()
	noScript := false
	for _, cmd := range cmds {
		if cmd != nil && redis.HasErrorPrefix(cmd.Err(), "NOSCRIPT") {
			noScript = true
			break
		}
	}
	if !noScript {
		return cmds, transportErr(err, cmds)
	}
	if lerr := s.Load(ctx, c).Err(); lerr != nil {
		return cmds, lerr
	}
	err = run()
	return cmds, transportErr(err, cmds)
}

// transportErr keeps a pipeline's error only when no command has its own
// reply (the connection failed); per-command errors are read from the cmds.
func transportErr(err error, cmds []*redis.Cmd) error {
	if err == nil {
		return nil
	}
	var rerr redis.Error
	if errors.As(err, &rerr) {
		return nil
	}
	return err
}

// Inspect implements backend.Inspector.
func (d *Driver) Inspect(ctx context.Context, key string) (backend.Info, error) {
	ks := d.keys(key)
	var h *redis.MapStringStringCmd
	var pttl *redis.DurationCmd
	var fence *redis.StringCmd
	var queued *redis.IntCmd
	_, err := d.c.Pipelined(ctx, func(p redis.Pipeliner) error {
		h = p.HGetAll(ctx, ks.lock)
		pttl = p.PTTL(ctx, ks.lock)
		fence = p.Get(ctx, ks.fence)
		queued = p.ZCard(ctx, ks.queue)
		return nil
	})
	if err != nil && !errors.Is(err, redis.Nil) {
		return backend.Info{}, fmt.Errorf("redislock: inspect %q: %w: %w", key, backend.ErrUnavailable, err)
	}
	info := infoFrom(key, h.Val(), pttl.Val(), fence.Val())
	if d.opts.Wait == WaitQueue {
		info.Waiters = int(queued.Val()) // may count waiters that died within their liveness window
	}
	return info, nil
}

// infoFrom builds an Info from a lock hash, its PTTL and the counter.
func infoFrom(key string, h map[string]string, pttl time.Duration, fence string) backend.Info {
	info := backend.Info{Key: key, Waiters: -1}
	if owner, ok := h["o"]; ok {
		info.Held, info.Owner = true, owner
		info.Token, _ = strconv.ParseUint(h["t"], 10, 64)
		if pttl > 0 {
			info.TTL = pttl
		}
		return info
	}
	info.Token, _ = strconv.ParseUint(fence, 10, 64)
	return info
}
