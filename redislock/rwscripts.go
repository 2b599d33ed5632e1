package redislock

import (
	"github.com/distlock/distlock/internal/redisproto"
	"github.com/redis/go-redis/v9"
)

// A read-write lock is a hash (KEYS[1]), a sorted set of read holds
// (KEYS[2]) and its own fencing counter (KEYS[3]), under the key's hash
// tag (one Cluster slot). The hash holds:
//
//	w, wx, wt, wn   the writer's owner, expiry (ms, server clock), token, hold count
//	a:<hold>        one field per write hold (a retried delivery is not counted twice)
//	h:<hold>        one field per read hold: its owner
//	r:<owner>       how many read holds the owner has (upgrade check, mark bypass)
//	m, mx           the waiting writer's mark: owner and expiry
//
// (A hash of an earlier version may also hold x, the hold released last:
// unused now, it expires with the hash.) The holds released lately are
// kept in a sorted set of their own (KEYS[4] of rwReleaseScript), scored
// by when they are forgotten, so that a retried release succeeds.
//
// The sorted set scores each read hold with its expiry. Every part
// expires by its own stamp, checked against Redis's clock (TIME) by every
// script; the keys' own TTLs only extend, to the latest stamp, so they
// vanish once every part has expired. The counter only counts writes, so
// its value is the last write's token, which a read grant returns.

// rwPrelude is shared Lua: now, prune() (drops expired read holds, an
// expired writer and an expired mark) and keep(key, at) (extends a key's
// TTL to at least the stamp at).
const rwPrelude = `
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local H, Z, F = KEYS[1], KEYS[2], KEYS[3]
local function prune()
  local dead = redis.call('ZRANGEBYSCORE', Z, '-inf', now)
  for _, hold in ipairs(dead) do
    local o = redis.call('HGET', H, 'h:' .. hold)
    redis.call('HDEL', H, 'h:' .. hold)
    if o and redis.call('HINCRBY', H, 'r:' .. o, -1) <= 0 then
      redis.call('HDEL', H, 'r:' .. o)
    end
  end
  if #dead > 0 then
    redis.call('ZREMRANGEBYSCORE', Z, '-inf', now)
  end
  local wx = tonumber(redis.call('HGET', H, 'wx') or '0')
  if wx > 0 and wx <= now then
    for _, f in ipairs(redis.call('HKEYS', H)) do
      if string.sub(f, 1, 2) == 'a:' then redis.call('HDEL', H, f) end
    end
    redis.call('HDEL', H, 'w', 'wx', 'wt', 'wn')
  end
  local mx = tonumber(redis.call('HGET', H, 'mx') or '0')
  if mx > 0 and mx <= now then
    redis.call('HDEL', H, 'm', 'mx')
  end
end
local function keep(key, at)
  if redis.call('PTTL', key) < at - now then
    redis.call('PEXPIRE', key, at - now)
  end
end
local function lastWrite()
  return tonumber(redis.call('GET', F) or '0')
end
`

// rwAcquireScript makes one attempt at a side: ARGV owner, ttl ms, mode
// ("r" or "w"), waiting ("1": a refused writer leaves or renews its mark),
// hold id. Reply {1, token, pttl} granted; {0, 0, ms until the soonest
// blocker expires} refused; {-2, 0, 0} an upgrade (the owner reads).
var rwAcquireScript = redis.NewScript(rwPrelude + `
prune()
local me, ttl, hold = ARGV[1], tonumber(ARGV[2]), ARGV[5]
local exp = now + ttl
local w = redis.call('HGET', H, 'w')
local m = redis.call('HGET', H, 'm')
if ARGV[3] == 'w' then
  if w == me then
    if redis.call('HSETNX', H, 'a:' .. hold, 1) == 1 then
      redis.call('HINCRBY', H, 'wn', 1)
    end
    if tonumber(redis.call('HGET', H, 'wx')) < exp then
      redis.call('HSET', H, 'wx', exp)
    end
    keep(H, exp)
    return {1, tonumber(redis.call('HGET', H, 'wt')), ttl}
  end
  if redis.call('HEXISTS', H, 'r:' .. me) == 1 then
    return {-2, 0, 0}
  end
  local till = nil
  if w then till = tonumber(redis.call('HGET', H, 'wx')) end
  local first = redis.call('ZRANGE', Z, 0, 0, 'WITHSCORES')
  if first[2] and (till == nil or tonumber(first[2]) < till) then till = tonumber(first[2]) end
  if till then
    if ARGV[4] == '1' and (not m or m == me) then
      redis.call('HSET', H, 'm', me, 'mx', exp)
      keep(H, exp)
    end
    return {0, 0, till - now}
  end
  local token = redis.call('INCR', F)
  redis.call('HSET', H, 'w', me, 'wx', exp, 'wt', token, 'wn', 1, 'a:' .. hold, 1)
  if m == me then redis.call('HDEL', H, 'm', 'mx') end
  keep(H, exp)
  return {1, token, ttl}
end
if redis.call('ZSCORE', Z, hold) then
  return {1, lastWrite(), ttl}
end
if w and w ~= me then
  return {0, 0, tonumber(redis.call('HGET', H, 'wx')) - now}
end
if m and m ~= me and redis.call('HEXISTS', H, 'r:' .. me) == 0 then
  return {0, 0, tonumber(redis.call('HGET', H, 'mx')) - now}
end
redis.call('ZADD', Z, exp, hold)
redis.call('HSET', H, 'h:' .. hold, me)
redis.call('HINCRBY', H, 'r:' .. me, 1)
keep(H, exp)
keep(Z, exp)
return {1, lastWrite(), ttl}
`)

// rwRefreshScript extends a hold: ARGV owner, ttl ms, mode, hold id.
// Reply 1 if held, 0 if not.
var rwRefreshScript = redis.NewScript(rwPrelude + `
prune()
local exp = now + tonumber(ARGV[2])
if ARGV[3] == 'w' then
  if redis.call('HGET', H, 'w') ~= ARGV[1] or redis.call('HEXISTS', H, 'a:' .. ARGV[4]) == 0 then
    return 0
  end
  if tonumber(redis.call('HGET', H, 'wx')) < exp then
    redis.call('HSET', H, 'wx', exp)
  end
  keep(H, exp)
  return 1
end
local s = redis.call('ZSCORE', Z, ARGV[4])
if not s or redis.call('HGET', H, 'h:' .. ARGV[4]) ~= ARGV[1] then
  return 0
end
if tonumber(s) < exp then
  redis.call('ZADD', Z, exp, ARGV[4])
end
keep(H, exp)
keep(Z, exp)
return 1
`)

// rwReleaseScript gives back a hold: ARGV owner, mode, hold id, channel,
// memory ms; KEYS[4] is the sorted set of holds released lately. The
// writer's last hold frees the write side, the last read hold the read
// side; either is announced on the channel. Every released hold is
// remembered for the memory in KEYS[4], so that a release the client sent
// again after losing the reply succeeds instead of reporting ErrNotHeld,
// also when other holds were released in between (readers release at
// once: one "released last" field would be overwritten). With mode "m" it
// withdraws the owner's mark instead. Reply 1 if it was held (or released
// within the memory), 0 if not.
var rwReleaseScript = redis.NewScript(rwPrelude + redisproto.ReleasedMemo + `
prune()
if ARGV[2] == 'm' then
  if redis.call('HGET', H, 'm') == ARGV[1] then
    redis.call('HDEL', H, 'm', 'mx')
    redis.call('PUBLISH', ARGV[4], 'released')
    return 1
  end
  return 0
end
local function again()
  if releasedLately(KEYS[4], ARGV[3]) then return 1 end
  return 0
end
local function remember() rememberReleased(KEYS[4], ARGV[3], tonumber(ARGV[5])) end
if ARGV[2] == 'w' then
  if redis.call('HGET', H, 'w') ~= ARGV[1] or redis.call('HDEL', H, 'a:' .. ARGV[3]) == 0 then
    return again()
  end
  if redis.call('HINCRBY', H, 'wn', -1) <= 0 then
    redis.call('HDEL', H, 'w', 'wx', 'wt', 'wn')
    redis.call('PUBLISH', ARGV[4], 'released')
  end
  remember()
  return 1
end
if redis.call('HGET', H, 'h:' .. ARGV[3]) ~= ARGV[1] or redis.call('ZREM', Z, ARGV[3]) == 0 then
  return again()
end
redis.call('HDEL', H, 'h:' .. ARGV[3])
if redis.call('HINCRBY', H, 'r:' .. ARGV[1], -1) <= 0 then
  redis.call('HDEL', H, 'r:' .. ARGV[1])
end
if redis.call('ZCARD', Z) == 0 then
  redis.call('PUBLISH', ARGV[4], 'released')
end
remember()
return 1
`)
