package redislock

import (
	"context"
	"maps"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/distlock/distlock/sandbox"
)

// TestServerCommandsPerPair pins what one uncontended acquire + release
// through a Locker makes a single server do, as Redis counts it (INFO
// commandstats: the two scripts and every command they run). Each command
// a script runs costs Redis a fixed toll beside its own work, which the
// caller waits for (docs/redis.md, "What a pair costs"), so the uncontended
// path runs only what its guarantees need: the acquire checks that neither
// the lock nor a queue exists (one EXISTS of both), mints the token and
// writes the lock with its TTL; the release drops its hold, reads the
// count, frees the lock while remembering the hold released (retried
// releases: one SET PX of its own key), looks for a waiter and announces
// the release. Deterministic: counts, not times.
func TestServerCommandsPerPair(t *testing.T) {
	const pairs = 20
	ctx := testCtx(t, time.Minute)
	g := sandbox.StartT(t, sandbox.Spec{Kind: sandbox.Redis})
	l, _, c := countedLocker(t, g.Node(0), nil)
	pair := func() {
		t.Helper()
		le, err := l.Acquire(ctx, "server-commands")
		if err != nil {
			t.Fatal(err)
		}
		if err := le.Release(ctx); err != nil {
			t.Fatal(err)
		}
	}
	pair() // warm-up: scripts loaded
	if err := c.ConfigResetStat(ctx).Err(); err != nil {
		t.Fatal(err)
	}
	for range pairs {
		pair()
	}
	got := commandCounts(ctx, t, c)
	delete(got, "config|resetstat")
	delete(got, "info")
	want := map[string]int{
		"evalsha": 2,
		// acquire: EXISTS lock queue (neither exists), INCR, HSET, PEXPIRE
		// release: HDEL, HGET n, DEL, SET last PX, EXISTS queue, PUBLISH
		"exists": 2, "incr": 1, "hset": 1, "pexpire": 1,
		"hdel": 1, "hget": 1, "del": 1, "set": 1, "publish": 1,
	}
	for cmd, n := range want {
		want[cmd] = n * pairs
	}
	if !maps.Equal(got, want) {
		t.Errorf("%d uncontended pairs ran %v in Redis, want %v", pairs, got, want)
	}
}

// commandCounts reads how many times Redis ran each command since the
// last CONFIG RESETSTAT.
func commandCounts(ctx context.Context, t *testing.T, c *redis.Client) map[string]int {
	t.Helper()
	raw, err := c.Info(ctx, "commandstats").Result()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]int{}
	for line := range strings.SplitSeq(raw, "\n") {
		name, rest, ok := strings.Cut(strings.TrimSpace(line), ":")
		name, isCmd := strings.CutPrefix(name, "cmdstat_")
		if !ok || !isCmd {
			continue
		}
		for f := range strings.SplitSeq(rest, ",") {
			if v, ok := strings.CutPrefix(f, "calls="); ok {
				n, err := strconv.Atoi(v)
				if err != nil {
					t.Fatalf("commandstats line %q: %v", line, err)
				}
				out[name] = n
			}
		}
	}
	return out
}
