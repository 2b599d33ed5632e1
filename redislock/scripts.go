package redislock

import "github.com/redis/go-redis/v9"

// The lock is a hash at KEYS[1] with the fields o (owner), n (hold count)
// and t (fencing token), and a TTL; the fencing counter is KEYS[2]. Every
// script checks the owner before it changes anything. go-redis runs them with
// EVALSHA and falls back to EVAL (which loads the script) on NOSCRIPT.

// acquireScript takes the lock if it is free, or re-enters it if ARGV[1]
// owns it, and sets the TTL (ARGV[2] ms) in the same step; a re-entry never
// shortens the TTL. A new hold gets the next value of the counter as its
// token. ARGV[3] is "1" in Redlock mode: the token is then written later by
// fenceScript, and the reply carries the counter's current value instead.
//
// Reply: {1, token, pttl, counter} when held by ARGV[1] (token 0 for a new
// Redlock hold; counter is the counter's value before this call); {0, 0,
// pttl, 0} when another owner holds it.
var acquireScript = redis.NewScript(`
local owner = redis.call('HGET', KEYS[1], 'o')
local ttl = tonumber(ARGV[2])
if owner == false then
  local token = 0
  local counter = tonumber(redis.call('GET', KEYS[2]) or '0')
  if ARGV[3] ~= '1' then
    token = redis.call('INCR', KEYS[2])
  end
  redis.call('HSET', KEYS[1], 'o', ARGV[1], 'n', 1, 't', token)
  redis.call('PEXPIRE', KEYS[1], ttl)
  return {1, token, ttl, counter}
end
if owner == ARGV[1] then
  redis.call('HINCRBY', KEYS[1], 'n', 1)
  local pttl = redis.call('PTTL', KEYS[1])
  if pttl < ttl then
    redis.call('PEXPIRE', KEYS[1], ttl)
    pttl = ttl
  end
  local counter = tonumber(redis.call('GET', KEYS[2]) or '0')
  return {1, tonumber(redis.call('HGET', KEYS[1], 't')), pttl, counter}
end
return {0, 0, redis.call('PTTL', KEYS[1]), 0}
`)

// releaseScript lowers ARGV[1]'s hold count and deletes the lock when it
// reaches zero, announcing the release on channel ARGV[2].
//
// Reply: -1 if ARGV[1] does not hold the lock, else the remaining count.
var releaseScript = redis.NewScript(`
if redis.call('HGET', KEYS[1], 'o') ~= ARGV[1] then
  return -1
end
local n = redis.call('HINCRBY', KEYS[1], 'n', -1)
if n > 0 then
  return n
end
redis.call('DEL', KEYS[1])
redis.call('PUBLISH', ARGV[2], 'released')
return 0
`)

// refreshScript extends ARGV[1]'s lock to live at least ARGV[2] ms, never
// shortening it. Reply: 1 if held by ARGV[1], else 0.
var refreshScript = redis.NewScript(`
if redis.call('HGET', KEYS[1], 'o') ~= ARGV[1] then
  return 0
end
if redis.call('PTTL', KEYS[1]) < tonumber(ARGV[2]) then
  redis.call('PEXPIRE', KEYS[1], ARGV[2])
end
return 1
`)

// fenceScript (Redlock) raises the counter KEYS[2] to at least ARGV[2] and,
// if ARGV[1] still holds the lock, records ARGV[2] as its token.
// Reply: 1 if ARGV[1] holds the lock, else 0.
var fenceScript = redis.NewScript(`
local token = tonumber(ARGV[2])
if tonumber(redis.call('GET', KEYS[2]) or '0') < token then
  redis.call('SET', KEYS[2], token)
end
if redis.call('HGET', KEYS[1], 'o') ~= ARGV[1] then
  return 0
end
redis.call('HSET', KEYS[1], 't', token)
return 1
`)

// allScripts lists the scripts, for loading them before a pipeline.
var allScripts = []*redis.Script{acquireScript, releaseScript, refreshScript, fenceScript}
