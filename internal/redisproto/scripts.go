package redisproto

import (
	"strconv"

	"github.com/redis/go-redis/v9"
)

// The lock is a hash at KEYS[1] with the fields o (owner), n (hold count),
// t (fencing token) and one field a:<hold> per hold, and a TTL; the fencing
// counter is KEYS[2]. A hold is one acquisition attempt (or one queued
// wait), named by a random id the client sends with every delivery of that
// attempt: scripts that find their hold's field know an earlier delivery
// already ran, so a request the client retried after losing its reply has
// the effect of one, and a failed attempt's cleanup removes only its own
// hold, never another process's hold of the same owner. The hold whose
// release freed the lock is kept for ReleasedMemory in a string of its own
// (keyset.last, SET PX: one command where the hash would take HSET and
// PEXPIRE), and a release that leaves holds records its hold in the
// hash's field r, so that a retried release of either succeeds instead of
// reporting ErrNotHeld. A free lock therefore has no hash: the queue-mode
// acquire checks "no lock, no queue" with one EXISTS of both keys. (A hash
// without o, left by an earlier version's release, still counts as free,
// on the slower path.)
// Every script checks the hold (or the owner) before it changes anything.
// go-redis runs them with EVALSHA and falls back to EVAL (which loads the
// script) on NOSCRIPT.

// AcquireScript takes the lock if it is free, or re-enters it if ARGV[1]
// owns it, for hold ARGV[3], and sets the TTL (ARGV[2] ms) in the same
// step; a re-entry never shortens the TTL, and a hold already recorded
// (a retried delivery) is not counted again. A new lock gets the next
// value of the counter as its token (INCR), in single and Redlock mode
// alike: in Redlock mode the client then picks the grant's token from
// every node's reply and raises (FenceScript) only the nodes that do not
// already record it.
//
// Reply: the token alone (an integer) when this call took the free lock,
// which stands for {1, token, ARGV[2], token} (freshGrant); {1, token,
// pttl, counter} when ARGV[1] already held it (counter is the counter's
// value after this call); {0, 0, pttl, 0} when another owner holds it.
// The free path makes four calls (HGET, INCR, HSET, PEXPIRE) and replies
// with no table: inside Redis every redis.call costs a fixed toll beside
// its own work, and a table reply another (INFO commandstats; see
// docs/redis.md, "What a pair costs"), which the caller waits for.
var AcquireScript = redis.NewScript(AcquireLua)

// AcquireLua is AcquireScript's source; multiScript runs it too, once
// per key.
const AcquireLua = `
local owner = redis.call('HGET', KEYS[1], 'o')
local ttl = tonumber(ARGV[2])
local hold = 'a:' .. ARGV[3]
if owner == false then
  local token = redis.call('INCR', KEYS[2])
  redis.call('HSET', KEYS[1], 'o', ARGV[1], 'n', 1, 't', token, hold, 1)
  redis.call('PEXPIRE', KEYS[1], ttl)
  return token
end
if owner == ARGV[1] then
` + reenterLua + `  local counter = tonumber(redis.call('GET', KEYS[2]) or '0')
  return {1, tonumber(redis.call('HGET', KEYS[1], 't')), pttl, counter}
end
return {0, 0, redis.call('PTTL', KEYS[1]), 0}
`

// reenterLua is the two acquire scripts' re-entry of a lock that the
// caller's owner holds (KEYS[1]): the hold counts once, and the lock lives
// at least ttl (milliseconds) from now; pttl is its time left after.
const reenterLua = `  if redis.call('HSETNX', KEYS[1], hold, 1) == 1 then
    redis.call('HINCRBY', KEYS[1], 'n', 1)
  end
  local pttl = redis.call('PTTL', KEYS[1])
  if pttl < ttl then
    redis.call('PEXPIRE', KEYS[1], ttl)
    pttl = ttl
  end
`

// A queue entry is live while its deadline is in the future, and no more
// than a minute ahead (a waiter's liveness window is at most 3 s): an entry
// the driver could not have written (malformed, or with a far deadline,
// from a client with write access to the keys) is dropped instead of
// jamming the queue.

// handOff is shared Lua: handoff() hands a freed lock (KEYS[1]) to the oldest
// live waiter of the fair queue (KEYS[2], liveness in KEYS[3]), minting its
// token from KEYS[4]. The lock is recorded held by the waiter's wait (its
// hold field), with a TTL no longer than the waiter's liveness window, so a
// lock handed to a waiter that died is freed soon. The message
// "h:<wait>", sent to the waiter's own inbox channel (one connection hears
// it, not every waiter of the key), only wakes the waiter: it confirms the
// grant with its next attempt (WaitScript), so a forged message grants
// nothing. With no live waiter it announces "released" on the key's
// channel (keyset.channel: the lock's name with "released" for "lock")
// unless ARGV[2] is "quiet" (a Redlock attempt that lost a split vote gives
// back a node it took, which frees no lock anyone waits for). Dead
// waiters met on the way are dropped. It returns how many connections
// heard "released" (0 after a hand-off).
const handOff = `
local function handoff()
  if redis.call('EXISTS', KEYS[2]) == 1 then
    local t = redis.call('TIME')
    local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
    while true do
      local w = redis.call('ZRANGE', KEYS[2], 0, 0)[1]
      if not w then break end
      local a = redis.call('HGET', KEYS[3], w)
      redis.call('ZREM', KEYS[2], w)
      redis.call('HDEL', KEYS[3], w)
      if a then
        local dl, ttl, win, wait, attempt, inbox = string.match(a, '^(%d+):(%d+):(%d+):(%w+):(%d+):(.+)$')
        if dl and tonumber(dl) > now and tonumber(dl) <= now + 60000 then
          local token = redis.call('INCR', KEYS[4])
          redis.call('HSET', KEYS[1], 'o', w, 'n', 1, 't', token, 'a:' .. wait, 1)
          redis.call('PEXPIRE', KEYS[1], math.min(tonumber(ttl), tonumber(win)))
          redis.call('PUBLISH', inbox, 'h:' .. wait)
          return
        end
      end
    end
  end
  if ARGV[2] ~= 'quiet' then
    return redis.call('PUBLISH', string.sub(KEYS[1], 1, -5) .. 'released', 'released')
  end
  return 0
end
`

// ReleaseScript gives back hold ARGV[1]: it lowers the hold count and,
// when it reaches zero, frees the lock (remembering the hold for
// ReleasedMemory) or hands it to the oldest live waiter (handOff). ARGV[2]
// is the mode, absent for a plain release (see ReleaseArgs). With ARGV[2]
// = "abandon" it is a waiter (wait ARGV[1], owner ARGV[3]) giving up
// instead: it leaves the queue (if its place is still its own) and gives
// back a lock handed to it.
//
// With ARGV[2] = "count" it is a release that, when it frees the lock,
// replies {0, how many connections heard "released"} (Redlock's first node:
// the driver learns that others wait for the key).
//
// The last hold's release runs HDEL, HGET n, DEL, SET last PX, then
// handOff's EXISTS queue and PUBLISH: six calls. A plain release sends
// one argument: Redis pays for each key and argument of a script (Lua
// strings made per run), so nothing the common path does not need is
// sent (the channel's name is derived from the lock's, the memory's length
// is in the source).
//
// KEYS: lock, queue, alive, fence, last. Reply: -1 if the hold is not
// held (and was not the last released), else the remaining count.
var ReleaseScript = redis.NewScript(handOff + `
if ARGV[2] == 'abandon' then
  local a = redis.call('HGET', KEYS[3], ARGV[3])
  if a and string.match(a, '^%d+:%d+:%d+:(%w+):') == ARGV[1] then
    redis.call('ZREM', KEYS[2], ARGV[3])
    redis.call('HDEL', KEYS[3], ARGV[3])
  end
end
if redis.call('HDEL', KEYS[1], 'a:' .. ARGV[1]) == 0 then
  if redis.call('HGET', KEYS[1], 'r') == ARGV[1] or redis.call('GET', KEYS[5]) == ARGV[1] then
    return 0
  end
  return -1
end
local n = tonumber(redis.call('HGET', KEYS[1], 'n') or '1') - 1
if n > 0 then
  redis.call('HSET', KEYS[1], 'n', n, 'r', ARGV[1])
  return n
end
redis.call('DEL', KEYS[1])
redis.call('SET', KEYS[5], ARGV[1], 'PX', ` + strconv.FormatInt(Millis(ReleasedMemory), 10) + `)
local heard = handoff()
if ARGV[2] == 'count' then
  return {0, heard or 0}
end
return 0
`)

// WaitScript is the acquire of queue mode, for owner ARGV[1], TTL ARGV[2]
// ms and hold ARGV[3] (a wait, or one TryAcquire). A lock held by the
// owner is confirmed (handed to this wait, or a retried delivery) or
// re-entered; a free lock goes to the caller only if no live waiter of
// another owner is ahead of it. Otherwise, with ARGV[4] (QueueEntry:
// "window:attempt:inbox"; absent or empty for a TryAcquire), the caller
// joins the queue (or stays in place) and renews its liveness: window ms
// from now, with its TTL for a hand-off, and its attempt number and inbox
// channel for the hand-off message. A caller that gets the lock leaves the
// queue if its place there is its own.
//
// With ARGV[5] = "c" (Redlock's first node) a granted reply carries the
// counter's value, as AcquireScript's does; else its counter field is 0 on
// a re-entry or confirmation (the single server needs no counter).
//
// The uncontended case comes first: a free lock with no queue (one EXISTS
// of both keys: a free lock has no hash) is taken with INCR, HSET and
// PEXPIRE, four calls in all, before anything else is set up.
//
// KEYS: lock, fence, queue, alive. Reply as AcquireScript.
var WaitScript = redis.NewScript(WaitLua)

// WaitLua is WaitScript's source; multiScript runs it too, once per key.
const WaitLua = `
local me, ttl = ARGV[1], tonumber(ARGV[2])
local hold = 'a:' .. ARGV[3]
if redis.call('EXISTS', KEYS[1], KEYS[3]) == 0 then
  local token = redis.call('INCR', KEYS[2])
  redis.call('HSET', KEYS[1], 'o', me, 'n', 1, 't', token, hold, 1)
  redis.call('PEXPIRE', KEYS[1], ttl)
  return token
end
local owner = redis.call('HGET', KEYS[1], 'o')
local now = nil
local function clock()
  if now == nil then
    local t = redis.call('TIME')
    now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
  end
  return now
end
local queued = true
local function leave()
  if not queued then return end
  local a = redis.call('HGET', KEYS[4], me)
  if a and string.match(a, '^%d+:%d+:%d+:(%w+):') == ARGV[3] then
    redis.call('ZREM', KEYS[3], me)
    redis.call('HDEL', KEYS[4], me)
  end
end
if owner == me then
` + reenterLua + `  leave()
  local counter = 0
  if ARGV[5] == 'c' then
    counter = tonumber(redis.call('GET', KEYS[2]) or '0')
  end
  return {1, tonumber(redis.call('HGET', KEYS[1], 't')), pttl, counter}
end
if owner == false then
  -- The queue is not empty, or the hash has no owner (an earlier
  -- version's released-hold memory); dead entries of the queue are
  -- dropped on the way to the oldest live one.
  local head = nil
  local w = redis.call('ZRANGE', KEYS[3], 0, 0)[1]
  queued = w ~= nil
  while w do
    local a = redis.call('HGET', KEYS[4], w)
    local dl = a and tonumber(string.match(a, '^(%d+):'))
    if dl and dl > clock() and dl <= clock() + 60000 then
      head = w
      break
    end
    redis.call('ZREM', KEYS[3], w)
    redis.call('HDEL', KEYS[4], w)
    w = redis.call('ZRANGE', KEYS[3], 0, 0)[1]
  end
  if head == nil or head == me then
    local token = redis.call('INCR', KEYS[2])
    redis.call('HSET', KEYS[1], 'o', me, 'n', 1, 't', token, hold, 1)
    redis.call('PEXPIRE', KEYS[1], ttl)
    leave()
    return {1, token, ttl, token}
  end
end
if ARGV[4] and ARGV[4] ~= '' then
  local win, attempt, inbox = string.match(ARGV[4], '^(%d+):(%d+):(.+)$')
  if redis.call('ZSCORE', KEYS[3], me) == false then
    redis.call('ZADD', KEYS[3], clock(), me)
  end
  redis.call('HSET', KEYS[4], me, (clock() + tonumber(win)) .. ':' .. ttl .. ':' .. win .. ':' .. ARGV[3] .. ':' .. attempt .. ':' .. inbox)
end
local pttl = redis.call('PTTL', KEYS[1])
if pttl < 0 then pttl = 0 end
return {0, 0, pttl, 0}
`

// RefreshScript extends hold ARGV[3] of owner ARGV[1] so the lock lives at
// least ARGV[2] ms, never shortening it. Reply: 1 if the hold is held,
// else 0.
var RefreshScript = redis.NewScript(`
if redis.call('HGET', KEYS[1], 'o') ~= ARGV[1] or redis.call('HEXISTS', KEYS[1], 'a:' .. ARGV[3]) == 0 then
  return 0
end
if redis.call('PTTL', KEYS[1]) < tonumber(ARGV[2]) then
  redis.call('PEXPIRE', KEYS[1], ARGV[2])
end
return 1
`)

// FenceScript (Redlock) raises the counter KEYS[2] to at least ARGV[2] and,
// if hold ARGV[3] of owner ARGV[1] is still held, records ARGV[2] as the
// lock's token. Reply: 1 if the hold is held, else 0.
var FenceScript = redis.NewScript(`
local token = tonumber(ARGV[2])
if tonumber(redis.call('GET', KEYS[2]) or '0') < token then
  redis.call('SET', KEYS[2], token)
end
if redis.call('HGET', KEYS[1], 'o') ~= ARGV[1] or redis.call('HEXISTS', KEYS[1], 'a:' .. ARGV[3]) == 0 then
  return 0
end
redis.call('HSET', KEYS[1], 't', token)
return 1
`)

// ReleasedMemo is a Lua fragment for the scripts that remember every
// hold or grant they release, for a while, in a sorted set of its own
// scored by when it is forgotten, so that a release the client sent again
// after losing the reply succeeds instead of reporting ErrNotHeld, also
// when other holders released in between (a semaphore's and a read-write
// lock's holders release at any time: one "released last" value would be
// overwritten). releasedLately(set, id) tells whether id was released
// and is still remembered; rememberReleased(set, id, ms) remembers it for
// ms, dropping what is forgotten. now (the server's clock, ms) must be a
// local defined before the fragment.
const ReleasedMemo = `
local function releasedLately(set, id)
  local gone = redis.call('ZSCORE', set, id)
  return gone and tonumber(gone) > now or false
end
local function rememberReleased(set, id, ms)
  redis.call('ZREMRANGEBYSCORE', set, '-inf', now)
  redis.call('ZADD', set, now + ms, id)
  redis.call('PEXPIRE', set, ms)
end
`
