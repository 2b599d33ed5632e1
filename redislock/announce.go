package redislock

import (
	"context"
	"fmt"

	"github.com/redis/go-redis/v9"

	"github.com/distlock/distlock/backend"
)

var _ backend.Announcer = (*Driver)(nil)

// setValueScript stores ARGV[3] as the value (field v) of the lock hash
// KEYS[1] if hold ARGV[2] of owner ARGV[1] still holds it: the check
// Refresh makes, in the same step. Neither the token nor the TTL change;
// the value goes with the hash when the lock is released or expires.
// Reply: 1 if set, 0 if the hold no longer holds the lock.
var setValueScript = redis.NewScript(`
if redis.call('HGET', KEYS[1], 'o') ~= ARGV[1] or redis.call('HEXISTS', KEYS[1], 'a:' .. ARGV[2]) == 0 then
  return 0
end
redis.call('HSET', KEYS[1], 'v', ARGV[3])
return 1
`)

// SetValue implements backend.Announcer (Capabilities.Values, single
// server and Cluster): the value is a field of the lock's hash, set by a
// script that checks the hold first. It is not waited for on replicas
// (WaitReplicas): a value is not what fences a leader, its term is.
func (d *Driver) SetValue(ctx context.Context, l backend.Lock, value string) error {
	rl, ok := l.(*lock)
	if !ok || rl.d != d {
		return fmt.Errorf("redislock: set value: %w: the lock (%T) is not a mutex granted by this driver", backend.ErrUnsupported, l)
	}
	run := func() (int64, error) {
		return setValueScript.Run(ctx, d.c, []string{rl.ks.Lock}, rl.owner, rl.hold, value).Int64()
	}
	var n int64
	var err error
	if !d.awaits(ctx) {
		n, err = run()
	} else {
		n, err = await(d, ctx, run, nil, 0)
	}
	if err != nil {
		d.suspect(err)
		return fmt.Errorf("redislock: set value %q: %w: %w", rl.key, errKind(err), err)
	}
	if n != 1 {
		return fmt.Errorf("redislock: set value %q: %w", rl.key, backend.ErrNotHeld)
	}
	return nil
}

// Watch implements backend.Announcer's other half, which this driver does
// not declare (Capabilities.Watch): Redis announces a grant only if every
// acquisition publishes it (one more command on every lock's path, and a
// broadcast to every node of a Cluster), or if the server is configured
// for keyspace notifications. Observe polls instead, woken by releases.
func (d *Driver) Watch(context.Context, string) (<-chan struct{}, func(), error) {
	return nil, nil, fmt.Errorf("redislock: watch: %w: Redis does not push lock grants (Capabilities.Watch is false); Observe polls", backend.ErrUnsupported)
}
