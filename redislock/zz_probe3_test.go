package redislock

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/redis/go-redis/v9"
)

func TestZZProbe3(t *testing.T) {
	c := redis.NewClient(&redis.Options{Addr: "127.0.0.1:27391"})
	defer c.Close()
	ctx := context.Background()
	stat := func(name string) string {
		raw := c.Info(ctx, "commandstats").Val()
		for line := range strings.SplitSeq(raw, "\n") {
			if strings.HasPrefix(line, "cmdstat_"+name+":") {
				f := strings.Split(strings.TrimSpace(line), ",")
				return f[2]
			}
		}
		return ""
	}
	const n = 5000
	keys := []string{"{k}:lock", "{k}:fence", "{k}:queue", "{k}:alive", "{k}:tomb"}
	pair := func(name string, acq, rel *redis.Script) {
		for round := 0; round < 2; round++ {
			c.ConfigResetStat(ctx)
			for i := 0; i < n; i++ {
				h := newID()
				if err := acq.Run(ctx, c, keys, "owner", 10000, "0", 3000, h, 0, "inbox").Err(); err != nil {
					t.Fatal(err)
				}
				if err := rel.Run(ctx, c, keys, "owner", "chan", "release", h, 10000).Err(); err != nil {
					t.Fatal(err)
				}
			}
			fmt.Println(name, stat("evalsha"))
		}
	}
	pair("current", redis.NewScript(waitScript.Hash()[:0]+`return 1`), redis.NewScript(`return 1`))
	// real current scripts with adapted keys
	cw := waitScript
	cr := releaseScript
	for round := 0; round < 2; round++ {
		c.ConfigResetStat(ctx)
		for i := 0; i < n; i++ {
			h := newID()
			cw.Run(ctx, c, []string{"{k}:lock", "{k}:fence", "{k}:queue", "{k}:alive"}, "owner", 10000, "0", 3000, h, 0, "inbox")
			cr.Run(ctx, c, []string{"{k}:lock", "{k}:queue", "{k}:alive", "{k}:fence"}, "owner", "chan", "release", h, 10000)
		}
		fmt.Println("current-real", stat("evalsha"))
	}
	acqB := redis.NewScript(`
local owner = redis.call('HGET', KEYS[1], 'o')
if owner == false then
  local w = redis.call('ZRANGE', KEYS[3], 0, 0)[1]
  if not w then
    local token = redis.call('INCR', KEYS[2])
    redis.call('HSET', KEYS[1], 'o', ARGV[1], 'n', 1, 't', token, 'a:' .. ARGV[5], 1)
    redis.call('PEXPIRE', KEYS[1], ARGV[2])
    return {1, token, tonumber(ARGV[2]), 0}
  end
end
return {0,0,0,0}
`)
	relB := redis.NewScript(`
local v = redis.call('HMGET', KEYS[1], 'n', 'a:' .. ARGV[4])
if v[2] and v[1] == '1' then
  redis.call('DEL', KEYS[1])
  redis.call('HSET', KEYS[1], 'r', ARGV[4])
  redis.call('PEXPIRE', KEYS[1], ARGV[5])
  if redis.call('EXISTS', KEYS[3]) == 0 then
    redis.call('PUBLISH', ARGV[2], 'released')
  end
  return 0
end
return -1
`)
	pair("B", acqB, relB)
	relC := redis.NewScript(`
local v = redis.call('HMGET', KEYS[1], 'n', 'a:' .. ARGV[4])
if v[2] and v[1] == '1' then
  redis.call('DEL', KEYS[1])
  redis.call('SET', KEYS[5], ARGV[4], 'PX', ARGV[5])
  if redis.call('EXISTS', KEYS[3]) == 0 then
    redis.call('PUBLISH', ARGV[2], 'released')
  end
  return 0
end
return -1
`)
	pair("C", acqB, relC)
	relD := redis.NewScript(`
local v = redis.call('HMGET', KEYS[1], 'n', 'a:' .. ARGV[4])
if v[2] and v[1] == '1' then
  redis.call('DEL', KEYS[1])
  if redis.call('EXISTS', KEYS[3]) == 0 then
    redis.call('PUBLISH', ARGV[2], 'released')
  end
  return 0
end
return -1
`)
	pair("D-notomb", acqB, relD)
	relE := redis.NewScript(`
local v = redis.call('HMGET', KEYS[1], 'n', 'a:' .. ARGV[4])
if v[2] and v[1] == '1' then
  redis.call('DEL', KEYS[1])
  return 0
end
return -1
`)
	pair("E-del-only", acqB, relE)
}
