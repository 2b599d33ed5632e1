package redislock

import (
	"context"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/distlock/distlock/backend"
	"github.com/distlock/distlock/internal/redisproto"
)

// Read-write locks (backend.Read and backend.Write requests, announced to a backend.Notifier) on a single
// server or a Cluster: one script per attempt, refresh and release
// (rwscripts.go). Waiters are woken by the release announcements of the
// key's read-write channel. Not offered with WaitReplicas (a grant would
// not wait for the replicas) nor by Redlock.

// rwKeyset names one read-write lock's Redis keys and channel, under the
// key's hash tag (the mutex's keys share the tag, never a name).
type rwKeyset struct {
	hash, readers, fence, channel string
	gone                          string // sorted set of holds released lately (rwReleaseScript)
}

func (d *Driver) rwKeys(key string) rwKeyset {
	tag := d.opts.Prefix + ":{" + redisproto.Escaper.Escape(key) + "}"
	return rwKeyset{hash: tag + ":rw", readers: tag + ":rw-readers", fence: tag + ":rw-fence", channel: tag + ":rw-released", gone: tag + ":rw-gone"}
}

func (ks rwKeyset) keys() []string { return []string{ks.hash, ks.readers, ks.fence} }

// ReleaseKeys are rwReleaseScript's KEYS.
func (ks rwKeyset) ReleaseKeys() []string {
	return []string{ks.hash, ks.readers, ks.fence, ks.gone}
}

func rwModeArg(mode backend.Kind) string {
	if mode == backend.Write {
		return "w"
	}
	return "r"
}

// tryRW is TryAcquire for a side of a read-write lock: one script.
func (d *Driver) tryRW(ctx context.Context, req backend.Request, mode backend.Kind, waiting bool) (backend.Grant, error) {
	if mode != backend.Read && mode != backend.Write {
		return backend.Grant{}, fmt.Errorf("redislock: acquire %q: %w: rw mode %v", req.Key, backend.ErrInvalidConfig, mode)
	}
	if err := ctx.Err(); err != nil {
		return backend.Grant{}, fmt.Errorf("redislock: acquire %q (%v): %w", req.Key, mode, context.Cause(ctx))
	}
	ks := d.rwKeys(req.Key)
	hold := redisproto.NewID()
	w := "0"
	if waiting {
		w = "1"
	}
	sent := time.Now()
	var v []int64
	var err error
	if !d.awaits(ctx) {
		v, err = rwAcquireScript.Run(ctx, d.c, ks.keys(), req.Owner, redisproto.Millis(req.TTL), rwModeArg(mode), w, hold).Int64Slice()
	} else {
		v, err = await(d, ctx, func() ([]int64, error) {
			return rwAcquireScript.Run(ctx, d.c, ks.keys(), req.Owner, redisproto.Millis(req.TTL), rwModeArg(mode), w, hold).Int64Slice()
		}, func(v []int64, err error) {
			if (err == nil && len(v) > 0 && v[0] == 1) || (err != nil && !neverSent(err)) {
				l := &rwLock{d: d, key: req.Key, ks: ks, owner: req.Owner, mode: mode, hold: hold}
				lateRelease(func(ctx context.Context) error { _, err := l.release(ctx); return err })
			}
		}, redisproto.CleanupTimeout)
	}
	if err != nil && abandoned(err) {
		return backend.Grant{}, fmt.Errorf("redislock: acquire %q (%v): %w: %w (a hold it took is given back; if the call is still out, when it ends)", req.Key, mode, backend.ErrUnavailable, err)
	}
	if err == nil && len(v) != 3 {
		err = fmt.Errorf("unexpected reply %v from the read-write acquire script", v)
	}
	if err != nil {
		if redisproto.NotAllowed(err) {
			return backend.Grant{}, fmt.Errorf("redislock: acquire %q (%v): %w: %w", req.Key, mode, backend.ErrInvalidConfig, err)
		}
		d.suspect(err)
		var cerr error
		if !neverSent(err) { // the script may have run: give back this attempt's hold
			l := &rwLock{d: d, key: req.Key, ks: ks, owner: req.Owner, mode: mode, hold: hold}
			cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), redisproto.CleanupTimeout)
			if _, rerr := l.release(cctx); rerr != nil {
				cerr = fmt.Errorf("cleanup failed, the hold expires by its TTL: %w", rerr)
			}
			cancel()
		}
		return backend.Grant{}, fmt.Errorf("redislock: acquire %q (%v): %w: %w", req.Key, mode, errKind(err), redisproto.AlsoFailed(err, cerr))
	}
	switch v[0] {
	case 1:
		l := &rwLock{d: d, key: req.Key, ks: ks, owner: req.Owner, mode: mode, hold: hold}
		return backend.Grant{Lock: l, Token: uint64(v[1]), ValidFrom: sent}, nil
	case -2:
		return backend.Grant{}, fmt.Errorf("redislock: acquire %q (write): %w: owner %s holds the read side", req.Key, backend.ErrUpgrade, req.Owner)
	}
	return backend.Grant{}, backend.NotAcquired(req.Key, time.Duration(max(v[2], 0))*time.Millisecond)
}

// Withdraw implements backend.Notifier: it removes req.Owner's
// writer-waiting mark on req.Key's read-write lock.
func (d *Driver) Withdraw(ctx context.Context, req backend.Request) error {
	if req.Kind != backend.Write {
		return nil
	}
	ks := d.rwKeys(req.Key)
	_, err := await(d, ctx, func() (struct{}, error) {
		return struct{}{}, rwReleaseScript.Run(ctx, d.c, ks.ReleaseKeys(), req.Owner, "m", "", ks.channel, redisproto.Millis(redisproto.ReleasedMemory)).Err()
	}, nil, 0)
	if err != nil {
		d.suspect(err)
		return fmt.Errorf("redislock: withdraw %q: %w: %w", req.Key, errKind(err), err)
	}
	return nil
}

// subscribeRW is Subscribe for a read-write lock over the driver's one shared
// pub/sub connection.
func (d *Driver) subscribeRW(ctx context.Context, key string) (<-chan struct{}, func(), error) {
	return d.subscribeChannel(ctx, d.rwKeys(key).channel, fmt.Sprintf("subscribe %q (rw)", key))
}

// rwLock is one hold of a side of a read-write lock.
type rwLock struct {
	d     *Driver
	key   string
	ks    rwKeyset
	owner string
	mode  backend.Kind
	hold  string

	released atomic.Bool
}

// Refresh implements backend.Lock.
func (l *rwLock) Refresh(ctx context.Context, ttl time.Duration) error {
	var n int64
	var err error
	if !l.d.awaits(ctx) {
		n, err = rwRefreshScript.Run(ctx, l.d.c, l.ks.keys(), l.owner, redisproto.Millis(ttl), rwModeArg(l.mode), l.hold).Int64()
	} else {
		n, err = await(l.d, ctx, func() (int64, error) {
			return rwRefreshScript.Run(ctx, l.d.c, l.ks.keys(), l.owner, redisproto.Millis(ttl), rwModeArg(l.mode), l.hold).Int64()
		}, nil, 0)
	}
	if err != nil {
		l.d.suspect(err)
		return fmt.Errorf("redislock: refresh %q (%v): %w: %w", l.key, l.mode, errKind(err), err)
	}
	if n != 1 {
		return fmt.Errorf("redislock: refresh %q (%v): %w", l.key, l.mode, backend.ErrNotHeld)
	}
	return nil
}

// Release implements backend.Lock.
func (l *rwLock) Release(ctx context.Context) error {
	if !l.released.CompareAndSwap(false, true) {
		return fmt.Errorf("redislock: release %q (%v): %w: already released", l.key, l.mode, backend.ErrNotHeld)
	}
	n, err := l.release(ctx)
	if err != nil {
		l.d.suspect(err)
		return fmt.Errorf("redislock: release %q (%v): %w: %w", l.key, l.mode, errKind(err), err)
	}
	if n != 1 {
		return fmt.Errorf("redislock: release %q (%v): %w", l.key, l.mode, backend.ErrNotHeld)
	}
	return nil
}

func (l *rwLock) release(ctx context.Context) (int64, error) {
	if !l.d.awaits(ctx) {
		return rwReleaseScript.Run(ctx, l.d.c, l.ks.ReleaseKeys(), l.owner, rwModeArg(l.mode), l.hold, l.ks.channel, redisproto.Millis(redisproto.ReleasedMemory)).Int64()
	}
	return await(l.d, ctx, func() (int64, error) {
		return rwReleaseScript.Run(ctx, l.d.c, l.ks.ReleaseKeys(), l.owner, rwModeArg(l.mode), l.hold, l.ks.channel, redisproto.Millis(redisproto.ReleasedMemory)).Int64()
	}, nil, 0)
}
