package redislock

import (
	"context"
	"fmt"
	"slices"
	"sync/atomic"
	"time"

	"github.com/distlock/distlock/backend"
	"github.com/distlock/distlock/internal/redisproto"
)

// lock is one hold of a lock on one Redis deployment.
type lock struct {
	d     *Driver
	key   string
	ks    redisproto.Keyset
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
		n, err = redisproto.ReleaseHold(ctx, l.d.c, l.ks, l.owner, l.hold, "release")
	} else {
		n, err = await(l.d, ctx, func() (int64, error) { return redisproto.ReleaseHold(ctx, l.d.c, l.ks, l.owner, l.hold, "release") }, nil, 0)
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
		n, err = redisproto.RefreshScript.Run(ctx, l.d.c, []string{l.ks.Lock}, l.owner, redisproto.Millis(ttl), l.hold).Int64()
	} else {
		n, err = await(l.d, ctx, func() (int64, error) {
			return redisproto.RefreshScript.Run(ctx, l.d.c, []string{l.ks.Lock}, l.owner, redisproto.Millis(ttl), l.hold).Int64()
		}, nil, 0)
	}
	l.d.suspect(err)
	return refreshResult(l.key, n, err)
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
	mine := backend.OwnLocks("redislock", locks, errs, func(l *lock) bool { return l.d == d })
	cmds, err := redisproto.PipelineRefresh(ctx, d.c, mine, ttls, func(l *lock) (redisproto.Keyset, string, string) { return l.ks, l.owner, l.hold })
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
	d.refreshPermits(ctx, locks, ttls, errs) // semaphore.go: the permit locks
	return errs
}
