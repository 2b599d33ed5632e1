package redislock

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/distlock/distlock/backend"
)

// semInspectScript lists the unexpired grants of a semaphore (KEYS as
// semAcquireScript's) by Redis's clock, without purging anything: owner,
// permits, token, ms left, for each.
var semInspectScript = redis.NewScript(`
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local out = {}
local live = redis.call('ZRANGEBYSCORE', KEYS[1], '(' .. now, '+inf', 'WITHSCORES')
for i = 1, #live, 2 do
  local v = redis.call('HGET', KEYS[2], live[i])
  if v then
    local n, tok = string.match(v, '^(%d+):(%d+)$')
    for _, x in ipairs({live[i], n, tok, tostring(tonumber(live[i + 1]) - now)}) do
      table.insert(out, x)
    end
  end
end
return out
`)

// rwInspectScript reports a read-write lock (KEYS as rwAcquireScript's)
// by Redis's clock, without pruning: the writer's owner, token and ms
// left ("" when none holds), then owner, the last write's token and ms
// left for each unexpired read hold.
var rwInspectScript = redis.NewScript(rwPrelude + `
local out = {'', '0', '0'}
local wx = tonumber(redis.call('HGET', H, 'wx') or '0')
local w = redis.call('HGET', H, 'w')
if w and wx > now then
  out = {w, redis.call('HGET', H, 'wt') or '0', tostring(wx - now)}
end
local live = redis.call('ZRANGEBYSCORE', Z, '(' .. now, '+inf', 'WITHSCORES')
for i = 1, #live, 2 do
  local o = redis.call('HGET', H, 'h:' .. live[i])
  if o then
    for _, x in ipairs({o, tostring(lastWrite()), tostring(tonumber(live[i + 1]) - now)}) do
      table.insert(out, x)
    end
  end
end
return out
`)

// inspectPermits is Inspect for a semaphore with one
// read-only script. Waiters subscribe and retry: their number is unknown.
func (d *Driver) inspectPermits(ctx context.Context, key string) (backend.Info, error) {
	info := backend.Info{Key: key, Waiters: -1}
	v, err := semInspectScript.Run(ctx, d.c, d.semKeys(key).list()[:2]).StringSlice()
	if err != nil {
		return info, fmt.Errorf("redislock: inspect semaphore %q: %w: %w", key, backend.ErrUnavailable, err)
	}
	for i := 0; i+3 < len(v); i += 4 {
		n, _ := strconv.Atoi(v[i+1])
		info.Permits += n
		info.Holders = append(info.Holders, backend.Holder{Owner: v[i], Permits: n, Token: parseUint(v[i+2]), TTL: parseMillis(v[i+3])})
	}
	slices.SortFunc(info.Holders, func(a, b backend.Holder) int { return cmp.Compare(a.Token, b.Token) })
	info.Held = info.Permits > 0
	return info, nil
}

// inspectRW is Inspect for a read-write lock with one read-only script: the
// writer, or the readers (one per owner, with the longest TTL of its
// holds). Waiters are unknown.
func (d *Driver) inspectRW(ctx context.Context, key string) (backend.Info, error) {
	info := backend.Info{Key: key, Waiters: -1}
	v, err := rwInspectScript.Run(ctx, d.c, d.rwKeys(key).keys()).StringSlice()
	if err != nil {
		return info, fmt.Errorf("redislock: inspect rw lock %q: %w: %w", key, backend.ErrUnavailable, err)
	}
	if len(v) < 3 {
		return info, fmt.Errorf("redislock: inspect rw lock %q: %w: unexpected reply %q", key, backend.ErrUnavailable, v)
	}
	if v[0] != "" {
		info.Owner, info.Token, info.TTL = v[0], parseUint(v[1]), parseMillis(v[2])
	}
	for i := 3; i+2 < len(v); i += 3 {
		h := backend.Holder{Owner: v[i], Token: parseUint(v[i+1]), TTL: parseMillis(v[i+2])}
		j := slices.IndexFunc(info.Holders, func(r backend.Holder) bool { return r.Owner == h.Owner })
		switch {
		case j < 0:
			info.Holders = append(info.Holders, h)
		case h.TTL > info.Holders[j].TTL:
			info.Holders[j].TTL = h.TTL
		}
	}
	slices.SortFunc(info.Holders, func(a, b backend.Holder) int { return cmp.Compare(a.Owner, b.Owner) })
	info.Held = info.Owner != "" || len(info.Holders) > 0
	return info, nil
}

func parseUint(s string) uint64 {
	n, _ := strconv.ParseUint(s, 10, 64)
	return n
}

func parseMillis(s string) time.Duration {
	n, _ := strconv.ParseInt(s, 10, 64)
	return time.Duration(max(n, 0)) * time.Millisecond
}
