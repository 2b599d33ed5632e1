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

var (
	_ backend.SemaphoreInspector = (*Driver)(nil)
	_ backend.RWInspector        = (*Driver)(nil)
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

// InspectSemaphore implements backend.SemaphoreInspector with one
// read-only script. Waiters subscribe and retry: their number is unknown.
func (d *Driver) InspectSemaphore(ctx context.Context, key string) (backend.SemaphoreInfo, error) {
	info := backend.SemaphoreInfo{Key: key, Waiters: -1}
	v, err := semInspectScript.Run(ctx, d.c, d.semKeys(key).list()[:2]).StringSlice()
	if err != nil {
		return info, fmt.Errorf("redislock: inspect semaphore %q: %w: %w", key, backend.ErrUnavailable, err)
	}
	for i := 0; i+3 < len(v); i += 4 {
		n, _ := strconv.Atoi(v[i+1])
		info.Held += n
		info.Holders = append(info.Holders, backend.Holder{Owner: v[i], Permits: n, Token: parseUint(v[i+2]), TTL: parseMillis(v[i+3])})
	}
	slices.SortFunc(info.Holders, func(a, b backend.Holder) int { return cmp.Compare(a.Token, b.Token) })
	return info, nil
}

// InspectRW implements backend.RWInspector with one read-only script: the
// writer, or the readers (one per owner, with the longest TTL of its
// holds). Waiters are unknown.
func (d *Driver) InspectRW(ctx context.Context, key string) (backend.RWInfo, error) {
	info := backend.RWInfo{Key: key, Waiters: -1}
	v, err := rwInspectScript.Run(ctx, d.c, d.rwKeys(key).keys()).StringSlice()
	if err != nil {
		return info, fmt.Errorf("redislock: inspect rw lock %q: %w: %w", key, backend.ErrUnavailable, err)
	}
	if len(v) < 3 {
		return info, fmt.Errorf("redislock: inspect rw lock %q: %w: unexpected reply %q", key, backend.ErrUnavailable, v)
	}
	if v[0] != "" {
		info.Writer = &backend.Holder{Owner: v[0], Token: parseUint(v[1]), TTL: parseMillis(v[2])}
	}
	for i := 3; i+2 < len(v); i += 3 {
		h := backend.Holder{Owner: v[i], Token: parseUint(v[i+1]), TTL: parseMillis(v[i+2])}
		j := slices.IndexFunc(info.Readers, func(r backend.Holder) bool { return r.Owner == h.Owner })
		switch {
		case j < 0:
			info.Readers = append(info.Readers, h)
		case h.TTL > info.Readers[j].TTL:
			info.Readers[j].TTL = h.TTL
		}
	}
	slices.SortFunc(info.Readers, func(a, b backend.Holder) int { return cmp.Compare(a.Owner, b.Owner) })
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
