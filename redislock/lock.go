package redislock

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/distlock/distlock/backend"
)

// lock is one hold of a lock on one Redis deployment.
type lock struct {
	d     *Driver
	key   string
	ks    Keyset
	owner string
	hold  string // the attempt or wait that took it

	released atomic.Bool // Release was called: a second call is refused locally
}

// Release implements backend.Lock: it gives back this hold, and deletes
// the lock (announcing it, or handing it to a waiter) when it was the last.
func (l *lock) Release(ctx context.Context) error {
	if !l.released.CompareAndSwap(false, true) {
		return fmt.Errorf("redislock: release %q: %w: already released", l.key, backend.ErrNotHeld)
	}
	var n int64
	var err error
	if !l.d.awaits(ctx) {
		n, err = ReleaseHold(ctx, l.d.c, l.ks, l.owner, l.hold, "release")
	} else {
		n, err = await(l.d, ctx, func() (int64, error) { return ReleaseHold(ctx, l.d.c, l.ks, l.owner, l.hold, "release") }, nil, 0)
	}
	if err != nil {
		l.d.suspect(err)
		return fmt.Errorf("redislock: release %q: %w: %w", l.key, errKind(err), err)
	}
	if n < 0 {
		return fmt.Errorf("redislock: release %q: %w", l.key, backend.ErrNotHeld)
	}
	return nil
}

// Refresh implements backend.Lock.
func (l *lock) Refresh(ctx context.Context, ttl time.Duration) error {
	var n int64
	var err error
	if !l.d.awaits(ctx) {
		n, err = RefreshScript.Run(ctx, l.d.c, []string{l.ks.Lock}, l.owner, Millis(ttl), l.hold).Int64()
	} else {
		n, err = await(l.d, ctx, func() (int64, error) {
			return RefreshScript.Run(ctx, l.d.c, []string{l.ks.Lock}, l.owner, Millis(ttl), l.hold).Int64()
		}, nil, 0)
	}
	l.d.suspect(err)
	return refreshResult(l.key, n, err)
}

// releasedMemory is how long a freed lock remembers the hold released
// last, so that a release the client retried after losing the reply
// succeeds (go-redis retries within its read timeouts and backoff).
const releasedMemory = 10 * time.Second

// release runs ReleaseScript for hold of owner.
func ReleaseHold(ctx context.Context, c redis.Scripter, ks Keyset, owner, hold, mode string) (int64, error) {
	return ReleaseScript.Run(ctx, c, ks.ReleaseKeys(), ReleaseArgs(owner, hold, mode)...).Int64()
}

// ReleaseArgs are ReleaseScript's ARGV for hold of owner in mode
// ("release", "count", "quiet" or "abandon"): a plain release sends the
// hold alone, only "abandon" needs the owner (its place in the queue).
func ReleaseArgs(owner, hold, mode string) []any {
	switch mode {
	case "release":
		return []any{hold}
	case "abandon":
		return []any{hold, mode, owner}
	}
	return []any{hold, mode}
}

func refreshResult(key string, n int64, err error) error {
	if err != nil {
		return fmt.Errorf("redislock: refresh %q: %w: %w", key, errKind(err), err)
	}
	if n != 1 {
		return fmt.Errorf("redislock: refresh %q: %w", key, backend.ErrNotHeld)
	}
	return nil
}

// RefreshAll implements backend.Batcher: every refresh goes out in
// one pipeline (one round trip per Cluster node).
func (d *Driver) RefreshAll(ctx context.Context, locks []backend.Lock, ttls []time.Duration) []error {
	if !d.awaits(ctx) {
		return d.refreshAll(ctx, locks, ttls)
	}
	// An abandoned batch reads them on after this returns.
	locks, ttls = slices.Clone(locks), slices.Clone(ttls)
	errs, err := await(d, ctx, func() ([]error, error) { return d.refreshAll(ctx, locks, ttls), nil }, nil, 0)
	if err != nil {
		errs = make([]error, len(locks))
		for i := range errs {
			errs[i] = fmt.Errorf("redislock: refresh: %w: %w", backend.ErrUnavailable, err)
		}
	}
	return errs
}

func (d *Driver) refreshAll(ctx context.Context, locks []backend.Lock, ttls []time.Duration) []error {
	errs := make([]error, len(locks))
	mine := make([]*lock, len(locks))
	var permits []*permitLock // semaphore.go
	for i, bl := range locks {
		if p, ok := bl.(*permitLock); ok && p.d == d {
			if permits == nil {
				permits = make([]*permitLock, len(locks))
			}
			permits[i] = p
			continue
		}
		l, ok := bl.(*lock)
		if !ok || l.d != d {
			errs[i] = fmt.Errorf("redislock: refresh: %w: lock %T is not from this driver", backend.ErrInvalidConfig, bl)
			continue
		}
		mine[i] = l
	}
	cmds, err := PipelineScript(ctx, d.c, RefreshScript, len(locks), func(i int) ([]string, []any, bool) {
		if mine[i] == nil {
			return nil, nil, false
		}
		return []string{mine[i].ks.Lock}, []any{mine[i].owner, Millis(ttls[i]), mine[i].hold}, true
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
	if permits != nil {
		d.refreshPermits(ctx, permits, ttls, errs)
	}
	return errs
}

// PipelineScript runs script n times in one pipeline, with the keys and
// args that call(i) gives (skipping i when it returns false). If Redis lost
// its script cache, it loads the script and runs the pipeline once more.
// cmds[i] is nil where nothing ran; err is the pipeline's transport error.
func PipelineScript(ctx context.Context, c redis.UniversalClient, s *redis.Script, n int, call func(int) ([]string, []any, bool)) ([]*redis.Cmd, error) {
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
