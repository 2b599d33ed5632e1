package redisproto

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/distlock/distlock/backend"
)

// ForceScript frees the lock (KEYS as releaseScript's, then the record's
// key) whoever holds it and however many holds it counts: the free path of
// releaseScript (the hash deleted, the lock handed to the oldest live
// waiter or its release announced), without a hold to check. The fencing
// counter is left as it is, so the next grant's token is above the freed
// one's. The record (ARGV: by, "force", reason, at in ms, how long to keep
// it in ms) is a hash with the freed owner and token. ARGV[2] is handOff's
// mode: never "quiet". Reply: {owner, token}, or false when the lock was
// free (nothing changed).
var ForceScript = redis.NewScript(handOff + `
local o = redis.call('HGET', KEYS[1], 'o')
if o == false then
  return false
end
local t = redis.call('HGET', KEYS[1], 't') or '0'
redis.call('DEL', KEYS[1])
redis.call('DEL', KEYS[6])
redis.call('HSET', KEYS[6], 'b', ARGV[1], 'r', ARGV[3], 'a', ARGV[4], 'o', o, 't', t)
redis.call('PEXPIRE', KEYS[6], ARGV[5])
handoff()
return {o, t}
`)

// ForcedKey names the record of key's last forced release: the lock's
// name with "forced" for "lock", in the lock's slot.
func (ks Keyset) ForcedKey() string { return strings.TrimSuffix(ks.Lock, "lock") + "forced" }

// ForceOn runs ForceScript on c; held is false for a free lock.
func ForceOn(ctx context.Context, c redis.Scripter, ks Keyset, f backend.Forced) (owner string, token uint64, held bool, err error) {
	keys := append(ks.ReleaseKeys()[:5:5], ks.ForcedKey())
	v, err := ForceScript.Run(ctx, c, keys, f.By, "force", f.Reason, f.At.UnixMilli(), Millis(backend.ForcedKeep)).StringSlice()
	if errors.Is(err, redis.Nil) {
		return "", 0, false, nil
	}
	if err != nil {
		return "", 0, false, err
	}
	if len(v) != 2 {
		return "", 0, false, fmt.Errorf("unexpected reply %q", v)
	}
	token, _ = strconv.ParseUint(v[1], 10, 64)
	return v[0], token, true, nil
}

// ForcedFrom reads a record ForceScript wrote, or nil if there is none.
func ForcedFrom(h map[string]string) *backend.Forced {
	by, ok := h["b"]
	if !ok {
		return nil
	}
	f := &backend.Forced{By: by, Reason: h["r"], Owner: h["o"]}
	if ms, err := strconv.ParseInt(h["a"], 10, 64); err == nil {
		f.At = time.UnixMilli(ms)
	}
	f.Token, _ = strconv.ParseUint(h["t"], 10, 64)
	return f
}
