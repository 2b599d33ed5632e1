package peers

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/base64"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
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

// The SQL fenced floors: the store's own lock (a row lock held by an open
// transaction, a named or advisory lock on a pinned connection) and, while
// it is held, a per-key counter raised in a statement of its own in
// autocommit on another of the pool's connections: committed (durable)
// before the grant is used, as a fencing token must be. (A counter raised
// in the lock's own transaction would be rolled back with a holder that
// died, and the next holder would get the same token again.)

// fenceTable holds the SQL fenced floors' counters.
const fenceTable = "distlock_bench_fence"

// fencedClient is a lock client plus a fencing counter that bump raises,
// returning the token, once the lock is held.
type fencedClient struct {
	client
	bump func(ctx context.Context, key string) (int64, error)
}

func (c *fencedClient) Acquire(ctx context.Context, key string) (func(context.Context) error, error) {
	release, err := c.client.Acquire(ctx, key)
	if err != nil {
		return nil, err
	}
	token, err := c.bump(ctx, key)
	if err == nil && token <= 0 {
		err = fmt.Errorf("fenced floor: token %d for %q", token, key)
	}
	if err != nil {
		_ = release(context.WithoutCancel(ctx))
		return nil, err
	}
	return release, nil
}

// mysqlFence returns bump for MySQL/MariaDB: INSERT ... ON DUPLICATE KEY
// UPDATE token = LAST_INSERT_ID(token + 1), the token read from the
// statement's own reply (no second round trip).
func mysqlFence(ctx context.Context, db *sql.DB) (func(context.Context, string) (int64, error), error) {
	_, err := db.ExecContext(ctx, "CREATE TABLE IF NOT EXISTS "+fenceTable+
		" (name VARBINARY(255) NOT NULL PRIMARY KEY, token BIGINT UNSIGNED NOT NULL) ENGINE=InnoDB")
	if err != nil {
		return nil, err
	}
	return func(ctx context.Context, key string) (int64, error) {
		res, err := db.ExecContext(ctx, "INSERT INTO "+fenceTable+" (name, token) VALUES (?, LAST_INSERT_ID(1)) "+
			"ON DUPLICATE KEY UPDATE token = LAST_INSERT_ID(token + 1)", key)
		if err != nil {
			return 0, err
		}
		return res.LastInsertId()
	}, nil
}

// pgFence returns bump for PostgreSQL: INSERT ... ON CONFLICT DO UPDATE
// SET token = token + 1 RETURNING token.
func pgFence(ctx context.Context, pool *pgxpool.Pool) (func(context.Context, string) (int64, error), error) {
	_, err := pool.Exec(ctx, "CREATE TABLE IF NOT EXISTS "+fenceTable+" (name TEXT PRIMARY KEY, token BIGINT NOT NULL)")
	if err != nil && !isPgDuplicate(err) { // two clients creating it at once
		return nil, err
	}
	return func(ctx context.Context, key string) (int64, error) {
		var token int64
		err := pool.QueryRow(ctx, "INSERT INTO "+fenceTable+" AS f (name, token) VALUES ($1, 1) "+
			"ON CONFLICT (name) DO UPDATE SET token = f.token + 1 RETURNING token", key).Scan(&token)
		return token, err
	}, nil
}
