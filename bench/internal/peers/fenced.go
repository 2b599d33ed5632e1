package peers

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/distlock/distlock/bench/internal/measure"
)

// A fenced floor is the least a lock of the store's kind can do and still
// hand out a fencing token, written here (no library): what distlock's
// figures are measured against where a peer gives no token (issue 31).
// It is a lock like the peers (it waits, it is crash-recovered), marked
// Peer.Fenced so that the report names it a floor.

// RedisFencedAbout says how the Redis fenced floor works.
const RedisFencedAbout = "one script SET key token NX PX ttl and INCR of a per-key counter (the token); release: one script that DELs the key if it still holds the token; " +
	"waits as bsm/redislock does here (a new attempt every 100 ms); no library"

// redisFencedAcquire takes KEYS[1] for ARGV[1] (a random token) for
// ARGV[2] ms and returns the next value of the counter KEYS[2] (the
// fencing token), or 0 when the key is held.
var redisFencedAcquire = redis.NewScript(`
if redis.call('SET', KEYS[1], ARGV[1], 'NX', 'PX', ARGV[2]) then
  return redis.call('INCR', KEYS[2])
end
return 0
`)

// redisFencedRelease deletes KEYS[1] if it still holds ARGV[1].
var redisFencedRelease = redis.NewScript(`
if redis.call('GET', KEYS[1]) == ARGV[1] then
  return redis.call('DEL', KEYS[1])
end
return 0
`)

// RedisFenced is the Redis fenced floor on client c, with locks of ttl.
type RedisFenced struct {
	C   *redis.Client
	TTL time.Duration
}

var _ measure.Contender = (*RedisFenced)(nil)

// errFencedHeld is a Try on a held key.
var errFencedHeld = errors.New("fenced floor: key held")

// Try makes one attempt: the release, or an error (errFencedHeld when
// the key is held). Its token is checked to be positive.
func (x *RedisFenced) Try(ctx context.Context, key string) (func(context.Context) error, error) {
	var b [16]byte
	_, _ = rand.Read(b[:])
	owner := base64.RawURLEncoding.EncodeToString(b[:])
	keys := []string{"fencedfloor:{" + key + "}", "fencedfloor:{" + key + "}:fence"}
	token, err := redisFencedAcquire.Run(ctx, x.C, keys[:], owner, x.TTL.Milliseconds()).Int64()
	switch {
	case err != nil:
		return nil, err
	case token == 0:
		return nil, errFencedHeld
	}
	return func(ctx context.Context) error {
		n, err := redisFencedRelease.Run(ctx, x.C, keys[:1], owner).Int64()
		if err == nil && n != 1 {
			err = fmt.Errorf("fenced floor: release %q: not held", key)
		}
		return err
	}, nil
}

// Acquire tries every 100 ms until the key is held or ctx ends.
func (x *RedisFenced) Acquire(ctx context.Context, key string) (func(context.Context) error, error) {
	for {
		rel, err := x.Try(ctx, key)
		if !errors.Is(err, errFencedHeld) {
			return rel, err
		}
		t := time.NewTimer(100 * time.Millisecond)
		select {
		case <-ctx.Done():
			t.Stop()
			return nil, context.Cause(ctx)
		case <-t.C:
		}
	}
}

// Close closes the client.
func (x *RedisFenced) Close() { _ = x.C.Close() }

func (x *RedisFenced) abandon(func(context.Context) error) { x.Close() }
