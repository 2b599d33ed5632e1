package redislock

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/distlock/distlock/backend"
	"github.com/distlock/distlock/internal/redisproto"
)

// multiScript takes several locks in one step (a multi-lock on one Redis
// server): it first checks that every key is free or the caller's, as
// the single-key script of the driver's mode would decide, changing
// nothing; then it takes each key by running that very script (its
// source, redisproto.AcquireLua or redisproto.WaitLua, as a function whose KEYS and ARGV are
// the key's), so the locks are the single-key protocol's: the same hash,
// hold fields, token counter and queue. Redis runs a script alone, so no
// other client sees a part of the set taken.
//
// KEYS: for each key, its lock, fence, queue and alive keys. ARGV[1]
// owner, ARGV[2] "q" (queue mode: the key's queue is respected, as a
// TryAcquire's redisproto.WaitScript does) or "n", ARGV[3] the inbox, then for each
// key its hold id and TTL in ms.
//
// Reply: {1, token, pttl, token, pttl, ...}, one pair per key, or {0, i,
// pttl} when the i-th key (from 1) is taken by another owner or queued
// for (pttl 0 when free with a live waiter ahead).
//
// The check mirrors the scripts' decision: the lock's owner field, and in
// queue mode, for a free lock with a queue, the first live entry (with
// redisproto.WaitScript's liveness rule). Time only moves forward, so a key the
// check passes is one the script grants; were it refused anyway, the
// script fails with an error and the client gives back every hold.
var multiScript = redis.NewScript(`
local function acquire_one(KEYS, ARGV)
` + redisproto.AcquireLua + `
end
local function wait_one(KEYS, ARGV)
` + redisproto.WaitLua + `
end
local me, queue, inbox = ARGV[1], ARGV[2] == 'q', ARGV[3]
local now = nil
local function ahead(q, alive)
  if redis.call('EXISTS', q) == 0 then return false end
  if now == nil then
    local t = redis.call('TIME')
    now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
  end
  for _, w in ipairs(redis.call('ZRANGE', q, 0, -1)) do
    local a = redis.call('HGET', alive, w)
    local dl = a and tonumber(string.match(a, '^(%d+):'))
    if dl and dl > now and dl <= now + 60000 then
      return w ~= me
    end
  end
  return false
end
local n = #KEYS / 4
for i = 1, n do
  local b = (i - 1) * 4
  local owner = redis.call('HGET', KEYS[b + 1], 'o')
  if owner ~= false and owner ~= me then
    return {0, i, redis.call('PTTL', KEYS[b + 1])}
  end
  if queue and owner == false and ahead(KEYS[b + 3], KEYS[b + 4]) then
    return {0, i, 0}
  end
end
local out = {1}
for i = 1, n do
  local b = (i - 1) * 4
  local hold, ttl = ARGV[2 + 2 * i], ARGV[3 + 2 * i]
  local r
  if queue then
    r = wait_one({KEYS[b + 1], KEYS[b + 2], KEYS[b + 3], KEYS[b + 4]}, {me, ttl, hold})
  else
    r = acquire_one({KEYS[b + 1], KEYS[b + 2]}, {me, ttl, hold})
  end
  if type(r) == 'number' then
    out[#out + 1] = r
    out[#out + 1] = tonumber(ttl)
  elseif r[1] == 1 then
    out[#out + 1] = r[2]
    out[#out + 1] = r[3]
  else
    return redis.error_reply('distlock multi acquire: key ' .. i .. ' refused after its check')
  end
end
return out
`)

// TryAcquireMulti implements backend.Batcher on a single server
// without WaitReplicas: one run of multiScript. A Cluster client refuses
// with ErrUnsupported: each lock's keys carry the lock's own name as hash
// tag, so two locks share a slot only by chance (docs/primitives.md).
func (d *Driver) TryAcquireMulti(ctx context.Context, reqs []backend.Request) ([]backend.Grant, error) {
	if !d.caps.MultiAtomic {
		return nil, fmt.Errorf("redislock: acquire %d keys in one step: %w: not with %s", len(reqs), backend.ErrUnsupported, d.multiless())
	}
	if len(reqs) == 0 {
		return nil, nil
	}
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("redislock: acquire %d keys: %w", len(reqs), context.Cause(ctx))
	}
	owner := reqs[0].Owner
	kss := make([]redisproto.Keyset, len(reqs))
	holds := make([]string, len(reqs))
	keys := make([]string, 0, 4*len(reqs))
	mode := "n"
	if d.opts.Wait == WaitQueue {
		mode = "q"
	}
	args := make([]any, 0, 3+2*len(reqs))
	args = append(args, owner, mode, d.inbox)
	for i, req := range reqs {
		if req.Owner != owner {
			return nil, fmt.Errorf("redislock: acquire %d keys: %w: requests of several owners", len(reqs), backend.ErrInvalidConfig)
		}
		kss[i], holds[i] = d.keys(req.Key), redisproto.NewID()
		keys = append(keys, kss[i].Lock, kss[i].Fence, kss[i].Queue, kss[i].Alive)
		args = append(args, holds[i], redisproto.Millis(req.TTL))
	}
	sent := time.Now()
	var v []int64
	var err error
	if !d.awaits(ctx) {
		v, err = multiScript.Run(ctx, d.c, keys, args...).Int64Slice()
	} else {
		v, err = await(d, ctx, func() ([]int64, error) { return multiScript.Run(ctx, d.c, keys, args...).Int64Slice() },
			func(v []int64, err error) {
				if (err == nil && len(v) > 0 && v[0] == 1) || (err != nil && !neverSent(err)) {
					lateRelease(func(ctx context.Context) error { return d.multiCleanup(ctx, kss, owner, holds) })
				}
			}, redisproto.CleanupTimeout)
	}
	if err != nil && abandoned(err) {
		return nil, fmt.Errorf("redislock: acquire %d keys: %w: %w (holds it took are given back; if the call is still out, when it ends)", len(kss), backend.ErrUnavailable, err)
	}
	if err != nil {
		return nil, d.multiFailed(ctx, kss, owner, holds, err)
	}
	if len(v) == 3 && v[0] == 0 && v[1] >= 1 && int(v[1]) <= len(reqs) {
		return nil, backend.NotAcquired(reqs[v[1]-1].Key, time.Duration(max(v[2], 0))*time.Millisecond)
	}
	if len(v) != 1+2*len(reqs) || v[0] != 1 {
		err := fmt.Errorf("unexpected reply %v from the multi-acquire script", v)
		return nil, d.multiFailed(ctx, kss, owner, holds, err)
	}
	grants := make([]backend.Grant, len(reqs))
	for i, req := range reqs {
		l := &lock{d: d, key: req.Key, ks: kss[i], owner: owner, hold: holds[i]}
		grants[i] = backend.Grant{Lock: l, Token: uint64(v[1+2*i]), ValidFrom: sent}
	}
	return grants, nil
}

// multiless names what keeps the driver from taking several keys in one
// step.
func (d *Driver) multiless() string {
	switch {
	case d.opts.WaitReplicas > 0:
		return "WaitReplicas (the step does not WAIT for replicas)"
	case d.caps.Name == "redis-cluster":
		return "a Redis Cluster client (each lock in a slot of its own)"
	}
	return fmt.Sprintf("a %T (one server only)", d.c)
}

// multiFailed gives back every hold a failed multiScript run may have
// taken (a script error after its check, or no reply), each owner- and
// hold-checked, in one pipeline, and returns the error.
func (d *Driver) multiFailed(ctx context.Context, kss []redisproto.Keyset, owner string, holds []string, err error) error {
	if redisproto.NotAllowed(err) {
		return fmt.Errorf("redislock: acquire %d keys: %w: %w", len(kss), backend.ErrInvalidConfig, err)
	}
	d.suspect(err)
	var cerr error
	if !neverSent(err) {
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), redisproto.CleanupTimeout)
		defer cancel()
		if e := d.multiCleanup(cctx, kss, owner, holds); e != nil {
			cerr = fmt.Errorf("cleanup failed, the locks expire by their TTL: %w", e)
		}
	}
	return fmt.Errorf("redislock: acquire %d keys: %w: %w", len(kss), errKind(err), redisproto.AlsoFailed(err, cerr))
}

// multiCleanup gives back the holds of one multiScript run, in one
// pipeline.
func (d *Driver) multiCleanup(ctx context.Context, kss []redisproto.Keyset, owner string, holds []string) error {
	_, err := await(d, ctx, func() (struct{}, error) {
		cmds, perr := redisproto.PipelineScript(ctx, d.c, redisproto.ReleaseScript, len(kss), func(i int) ([]string, []any, bool) {
			return kss[i].ReleaseKeys(), redisproto.ReleaseArgs(owner, holds[i], "release"), true
		})
		errs := []error{perr}
		for _, c := range cmds {
			if c != nil {
				errs = append(errs, c.Err())
			}
		}
		return struct{}{}, errors.Join(errs...)
	}, nil, 0)
	return err
}
