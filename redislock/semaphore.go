package redislock

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/distlock/distlock/backend"
	"github.com/distlock/distlock/internal/redisproto"
)

// Semaphores, natively: a semaphore is a sorted set of its grants (member:
// the grant's owner, unique per grant; score: its expiry in the server's
// milliseconds) beside a hash of each grant's permits and token (owner ->
// "permits:token") and the total held (field ""), and a counter of
// fencing tokens. One script purges the expired grants by score, counts,
// and adds the new grant with its expiry in the same step; refresh and
// release are one script each, owner-checked. A sorted set of the grants
// released in the last redisproto.ReleasedMemory lets a retried release succeed. Every key carries the
// semaphore's hash tag, so one script may touch them all in Redis
// Cluster too. A release is announced on the semaphore's channel; waiters
// subscribe and retry (there is no queue of permits: waiting is not fair).
//
// A semaphore's keys start with prefix:sem:, a lock's with prefix:{, so a
// semaphore and a lock of the same name never meet, and List and Inspect
// see only locks.

// semKeys are the Redis names of one semaphore.
type semKeys struct {
	grants  string // sorted set: owner -> expiry (server ms)
	permits string // hash: owner -> "permits:token"; "" -> permits held in all
	fence   string // counter of fencing tokens; never expires
	channel string // announces releases
	// sorted set: owner -> ms (server clock) until which a retried
	// release of that grant succeeds (redisproto.ReleasedMemory)
	released string
}

func (d *Driver) semKeys(key string) semKeys {
	tag := d.opts.Prefix + ":sem:{" + redisproto.Escaper.Escape(key) + "}"
	return semKeys{grants: tag + ":grants", permits: tag + ":permits", fence: tag + ":fence", channel: tag + ":released", released: tag + ":gone"}
}

func (k semKeys) list() []string { return []string{k.grants, k.permits, k.fence} }

// ReleaseKeys are semReleaseScript's KEYS.
func (k semKeys) ReleaseKeys() []string {
	return []string{k.grants, k.permits, k.fence, k.released}
}

// semPurge is the script prologue that reads the server's clock into now
// and drops the expired grants, keeping the total right.
const semPurge = `
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local used = tonumber(redis.call('HGET', KEYS[2], '') or '0')
local expired = redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', now)
for _, o in ipairs(expired) do
  local v = redis.call('HGET', KEYS[2], o)
  if v then
    used = used - tonumber(string.match(v, '^(%d+):'))
    redis.call('HDEL', KEYS[2], o)
  end
end
if #expired > 0 then
  redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now)
  redis.call('HSET', KEYS[2], '', used)
end
`

// semAcquireScript grants ARGV[2] permits to owner ARGV[1] for ARGV[4] ms
// if the permits held plus those are at most the limit ARGV[3]. A grant
// already recorded for the owner (a delivery the client retried) is
// answered again, never counted twice. The keys expire with their last
// grant.
//
// Reply: {1, token, 0} granted; {0, 0, ms until the first grant expires}.
var semAcquireScript = redis.NewScript(semPurge + `
local owner, n, limit, ttl = ARGV[1], tonumber(ARGV[2]), tonumber(ARGV[3]), tonumber(ARGV[4])
local mine = redis.call('HGET', KEYS[2], owner)
if mine then
  return {1, tonumber(string.match(mine, ':(%d+)$')), 0}
end
if used + n > limit then
  local first = redis.call('ZRANGE', KEYS[1], 0, 0, 'WITHSCORES')
  local after = 0
  if first[2] then after = tonumber(first[2]) - now end
  return {0, 0, after}
end
local token = redis.call('INCR', KEYS[3])
redis.call('ZADD', KEYS[1], now + ttl, owner)
redis.call('HSET', KEYS[2], owner, n .. ':' .. token, '', used + n)
for i = 1, 2 do
  if redis.call('PTTL', KEYS[i]) < ttl then redis.call('PEXPIRE', KEYS[i], ttl) end
end
return {1, token, 0}
`)

// semRefreshScript makes owner ARGV[1]'s grant live at least ARGV[2] ms
// from now. Reply: 1, or 0 if the grant is gone (expired or released).
var semRefreshScript = redis.NewScript(`
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local exp = redis.call('ZSCORE', KEYS[1], ARGV[1])
if not exp or tonumber(exp) <= now then return 0 end
local ttl = tonumber(ARGV[2])
if tonumber(exp) < now + ttl then redis.call('ZADD', KEYS[1], 'XX', now + ttl, ARGV[1]) end
for i = 1, 2 do
  if redis.call('PTTL', KEYS[i]) < ttl then redis.call('PEXPIRE', KEYS[i], ttl) end
end
return 1
`)

// semReleaseScript removes owner ARGV[1]'s grant and announces the
// release on ARGV[2]. It remembers the grant for redisproto.ReleasedMemory in the
// sorted set KEYS[4] (scored by when it is forgotten), so that a release
// the client sent again after losing the reply succeeds instead of
// reporting ErrNotHeld: a semaphore has many holders releasing at once, so
// one "last released" value would be overwritten in between. Reply: 1
// (also for a grant released within the memory), or 0 if the grant was
// gone already.
var semReleaseScript = redis.NewScript(semPurge + redisproto.ReleasedMemo + `
local v = redis.call('HGET', KEYS[2], ARGV[1])
if not v then
  if releasedLately(KEYS[4], ARGV[1]) then return 1 end
  return 0
end
rememberReleased(KEYS[4], ARGV[1], ` + strconv.FormatInt(redisproto.Millis(redisproto.ReleasedMemory), 10) + `)
redis.call('ZREM', KEYS[1], ARGV[1])
redis.call('HDEL', KEYS[2], ARGV[1])
used = used - tonumber(string.match(v, '^(%d+):'))
if used <= 0 then
  redis.call('DEL', KEYS[1], KEYS[2])
else
  redis.call('HSET', KEYS[2], '', used)
end
redis.call('PUBLISH', ARGV[2], 'released')
return 1
`)

// tryPermits is TryAcquire for a semaphore's permits: one run of the
// acquire script (one round trip).
func (d *Driver) tryPermits(ctx context.Context, req backend.Request) (backend.Grant, error) {
	if err := ctx.Err(); err != nil {
		return backend.Grant{}, fmt.Errorf("redislock: acquire permits of %q: %w", req.Key, context.Cause(ctx))
	}
	ks := d.semKeys(req.Key)
	sent := time.Now()
	var v []int64
	var err error
	if !d.awaits(ctx) {
		v, err = semAcquireScript.Run(ctx, d.c, ks.list(), req.Owner, req.Permits, req.Limit, redisproto.Millis(req.TTL)).Int64Slice()
	} else {
		v, err = await(d, ctx, func() ([]int64, error) {
			return semAcquireScript.Run(ctx, d.c, ks.list(), req.Owner, req.Permits, req.Limit, redisproto.Millis(req.TTL)).Int64Slice()
		}, func(v []int64, err error) {
			if (err == nil && len(v) > 0 && v[0] == 1) || (err != nil && !neverSent(err)) {
				lateRelease(func(ctx context.Context) error { return d.semCleanup(ctx, ks, req.Owner) })
			}
		}, redisproto.CleanupTimeout)
	}
	if err != nil && abandoned(err) {
		return backend.Grant{}, fmt.Errorf("redislock: acquire permits of %q: %w: %w (permits it took are given back; if the call is still out, when it ends)", req.Key, backend.ErrUnavailable, err)
	}
	if err == nil && len(v) != 3 {
		err = fmt.Errorf("unexpected reply %v from the semaphore acquire script", v)
	}
	if err != nil && redisproto.NotAllowed(err) {
		// Refused before the script ran: nothing to clean up.
		return backend.Grant{}, fmt.Errorf("redislock: acquire permits of %q: %w: %w", req.Key, backend.ErrInvalidConfig, err)
	}
	if err != nil {
		d.suspect(err)
		var cerr error
		if !neverSent(err) {
			cerr = d.semCleanup(ctx, ks, req.Owner)
		}
		return backend.Grant{}, fmt.Errorf("redislock: acquire permits of %q: %w: %w", req.Key, errKind(err), redisproto.AlsoFailed(err, cerr))
	}
	if v[0] != 1 {
		return backend.Grant{}, backend.NotAcquired(req.Key, time.Duration(max(0, v[2]))*time.Millisecond)
	}
	l := &permitLock{d: d, key: req.Key, ks: ks, owner: req.Owner}
	return backend.Grant{Lock: l, Token: uint64(v[1]), ValidFrom: sent}, nil
}

// semCleanup removes the grant an attempt whose outcome is unknown may
// have made (its owner is unique to the attempt).
func (d *Driver) semCleanup(ctx context.Context, ks semKeys, owner string) error {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), redisproto.CleanupTimeout)
	defer cancel()
	if _, err := await(d, ctx, func() (struct{}, error) {
		return struct{}{}, semReleaseScript.Run(ctx, d.c, ks.ReleaseKeys(), owner, ks.channel).Err()
	}, nil, 0); err != nil {
		return fmt.Errorf("cleanup failed, the permits expire by their TTL: %w", err)
	}
	return nil
}

// subscribePermits is Subscribe for a semaphore on the driver's
// shared pub/sub connection.
func (d *Driver) subscribePermits(ctx context.Context, key string) (<-chan struct{}, func(), error) {
	return d.subscribeChannel(ctx, d.semKeys(key).channel, fmt.Sprintf("subscribe to permits of %q", key))
}

// permitLock is one grant of a semaphore's permits.
type permitLock struct {
	d     *Driver
	key   string
	ks    semKeys
	owner string

	released atomic.Bool
}

// Refresh implements backend.Lock.
func (l *permitLock) Refresh(ctx context.Context, ttl time.Duration) error {
	var n int64
	var err error
	if !l.d.awaits(ctx) {
		n, err = semRefreshScript.Run(ctx, l.d.c, l.ks.list()[:2], l.owner, redisproto.Millis(ttl)).Int64()
	} else {
		n, err = await(l.d, ctx, func() (int64, error) {
			return semRefreshScript.Run(ctx, l.d.c, l.ks.list()[:2], l.owner, redisproto.Millis(ttl)).Int64()
		}, nil, 0)
	}
	return l.refreshResult(n, err)
}

func (l *permitLock) refreshResult(n int64, err error) error {
	if err != nil {
		l.d.suspect(err)
		return fmt.Errorf("redislock: refresh permits of %q: %w: %w", l.key, errKind(err), err)
	}
	if n != 1 {
		return fmt.Errorf("redislock: refresh permits of %q: %w", l.key, backend.ErrNotHeld)
	}
	return nil
}

// Release implements backend.Lock.
func (l *permitLock) Release(ctx context.Context) error {
	if !l.released.CompareAndSwap(false, true) {
		return fmt.Errorf("redislock: release permits of %q: %w: already released", l.key, backend.ErrNotHeld)
	}
	var n int64
	var err error
	if !l.d.awaits(ctx) {
		n, err = semReleaseScript.Run(ctx, l.d.c, l.ks.ReleaseKeys(), l.owner, l.ks.channel).Int64()
	} else {
		n, err = await(l.d, ctx, func() (int64, error) {
			return semReleaseScript.Run(ctx, l.d.c, l.ks.ReleaseKeys(), l.owner, l.ks.channel).Int64()
		}, nil, 0)
	}
	if err != nil {
		l.d.suspect(err)
		return fmt.Errorf("redislock: release permits of %q: %w: %w", l.key, errKind(err), err)
	}
	if n != 1 {
		return fmt.Errorf("redislock: release permits of %q: %w", l.key, backend.ErrNotHeld)
	}
	return nil
}

// refreshPermits refreshes d's permit locks among all in one pipeline,
// for RefreshAll: it sets the error of each, over the ErrInvalidConfig
// that backend.OwnLocks gave it (it is not a *lock).
func (d *Driver) refreshPermits(ctx context.Context, all []backend.Lock, ttls []time.Duration, errs []error) {
	var locks []*permitLock
	for i, bl := range all {
		if p, ok := bl.(*permitLock); ok && p.d == d {
			if locks == nil {
				locks = make([]*permitLock, len(all))
			}
			locks[i] = p
		}
	}
	if locks == nil {
		return
	}
	cmds, err := redisproto.PipelineScript(ctx, d.c, semRefreshScript, len(locks), func(i int) ([]string, []any, bool) {
		if locks[i] == nil {
			return nil, nil, false
		}
		return locks[i].ks.list()[:2], []any{locks[i].owner, redisproto.Millis(ttls[i])}, true
	})
	for i, l := range locks {
		if l == nil {
			continue
		}
		if cmds[i] == nil {
			if err == nil {
				err = errors.New("refresh not sent")
			}
			errs[i] = l.refreshResult(0, err)
			continue
		}
		n, cerr := cmds[i].Int64()
		errs[i] = l.refreshResult(n, cerr)
	}
}
