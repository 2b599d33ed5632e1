package redislock

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

var (
	_ backend.Freer = (*Driver)(nil)
	_ backend.Freer = (*Redlock)(nil)
)

// forceScript frees the lock (KEYS as releaseScript's, then the record's
// key) whoever holds it and however many holds it counts: the free path of
// releaseScript (the hash deleted, the lock handed to the oldest live
// waiter or its release announced), without a hold to check. The fencing
// counter is left as it is, so the next grant's token is above the freed
// one's. The record (ARGV: by, "force", reason, at in ms, how long to keep
// it in ms) is a hash with the freed owner and token. ARGV[2] is handOff's
// mode: never "quiet". Reply: {owner, token}, or false when the lock was
// free (nothing changed).
var forceScript = redis.NewScript(handOff + `
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

// forcedKey names the record of key's last forced release: the lock's
// name with "forced" for "lock", in the lock's slot.
func (ks keyset) forcedKey() string { return strings.TrimSuffix(ks.lock, "lock") + "forced" }

// forceOn runs forceScript on c; held is false for a free lock.
func forceOn(ctx context.Context, c redis.Scripter, ks keyset, f backend.Forced) (owner string, token uint64, held bool, err error) {
	keys := append(ks.releaseKeys()[:5:5], ks.forcedKey())
	v, err := forceScript.Run(ctx, c, keys, f.By, "force", f.Reason, f.At.UnixMilli(), millis(backend.ForcedKeep)).StringSlice()
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

// ForceRelease implements backend.Freer.
func (d *Driver) ForceRelease(ctx context.Context, key string, f backend.Forced) (backend.Info, error) {
	owner, token, held, err := forceOn(ctx, d.c, d.keys(key), f)
	if err != nil {
		return backend.Info{}, fmt.Errorf("redislock: force release %q: %w: %w", key, errKind(err), err)
	}
	if !held {
		return backend.Info{Key: key, Waiters: -1}, fmt.Errorf("redislock: force release %q: %w: the lock is free", key, backend.ErrNotHeld)
	}
	return backend.Info{Key: key, Held: true, Owner: owner, Token: token, Waiters: -1}, nil
}

// ForceRelease implements backend.Freer on every node. It succeeds when
// the lock is gone from a majority of nodes (no one can hold it then, and
// no majority can renew it); a node that did not answer keeps the lock
// until its TTL, which no quorum can extend.
func (r *Redlock) ForceRelease(ctx context.Context, key string, f backend.Forced) (backend.Info, error) {
	type res struct {
		owner string
		token uint64
		held  bool
	}
	ks := r.keys(key)
	vals, errs := eachNode(r, ctx, 10*time.Second, func(ctx context.Context, _ int, n *node) (res, error) {
		o, t, held, err := forceOn(ctx, n.c, ks, f)
		return res{o, t, held}, err
	})
	info := backend.Info{Key: key, Waiters: -1}
	answered := 0
	for i, v := range vals {
		if errs[i] != nil {
			continue
		}
		answered++
		if v.held {
			info.Held, info.Owner = true, v.owner
			info.Token = max(info.Token, v.token)
		}
	}
	if answered < r.quorum {
		return info, fmt.Errorf("redislock: force release %q: %w: %d of %d nodes answered, %d needed: %w", key, backend.ErrUnavailable, answered, len(r.nodes), r.quorum, errors.Join(errs...))
	}
	if !info.Held {
		return info, fmt.Errorf("redislock: force release %q: %w: the lock is free", key, backend.ErrNotHeld)
	}
	return info, nil
}

// forcedFrom reads a record forceScript wrote, or nil if there is none.
func forcedFrom(h map[string]string) *backend.Forced {
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
