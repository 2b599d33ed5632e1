package redislock

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/distlock/distlock"
	"github.com/distlock/distlock/internal/redisproto"
	"github.com/distlock/distlock/sandbox"
)

// TestOpenRefusesEvictingServer: a server with a memory limit and an
// eviction policy other than noeviction may delete the driver's keys under
// memory pressure: an evicted lock lets a second owner in while the first
// still holds it, and an evicted fencing counter starts again at 1, so
// tokens go backwards. Open must refuse such a server (ErrInvalidConfig);
// if it does not, the test shows the counter evicted and the next token
// lower than the last.
func TestOpenRefusesEvictingServer(t *testing.T) {
	g := sandbox.StartT(t, sandbox.Spec{Kind: sandbox.Redis})
	ctx := testCtx(t, 30*time.Second)
	admin := nodeClient(g.Node(0))
	defer admin.Close()
	// Put the policy and limit back before the sandbox is reused.
	t.Cleanup(func() {
		c := nodeClient(g.Node(0))
		defer c.Close()
		cctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = c.ConfigSet(cctx, "maxmemory", "0").Err()
		_ = c.ConfigSet(cctx, "maxmemory-policy", "noeviction").Err()
		_ = c.FlushAll(cctx).Err()
	})

	// Without a limit, no policy evicts: Open accepts the server.
	mustConfig(t, admin, "maxmemory-policy", "allkeys-lru")
	l, err := distlock.Open(ctx, g.URL())
	if err != nil {
		t.Fatalf("Open with allkeys-lru and no maxmemory: %v", err)
	}
	_ = l.Close()

	used := usedMemory(t, admin)
	mustConfig(t, admin, "maxmemory", strconv.FormatInt(used+4<<20, 10))
	l, err = distlock.Open(ctx, g.URL())
	if err == nil {
		defer l.Close()
		tokensAcrossEviction(ctx, t, admin, l)
		t.Fatal("Open accepted a server with maxmemory-policy allkeys-lru and a maxmemory")
	}
	if !errors.Is(err, distlock.ErrInvalidConfig) || !strings.Contains(err.Error(), "allkeys-lru") {
		t.Fatalf("Open of an evicting server: %v, want ErrInvalidConfig naming the policy", err)
	}
	t.Logf("Open: %v", err)
	if !strings.Contains(err.Error(), "allow_eviction=true") {
		t.Errorf("the refusal does not name the way out: %v", err)
	}

	// allow_eviction=true: the user takes the risk, Open accepts it.
	l, err = distlock.Open(ctx, g.URL()+"?allow_eviction=true")
	if err != nil {
		t.Fatalf("Open with allow_eviction=true: %v", err)
	}
	_ = l.Close()
	if _, err := distlock.Open(ctx, g.URL()+"?allow_eviction=maybe"); !errors.Is(err, distlock.ErrInvalidConfig) {
		t.Errorf("allow_eviction=maybe: %v, want ErrInvalidConfig", err)
	}

	// noeviction with a limit: writes fail when memory is full, nothing is
	// deleted; Open accepts it.
	mustConfig(t, admin, "maxmemory-policy", "noeviction")
	l, err = distlock.Open(ctx, g.URL())
	if err != nil {
		t.Fatalf("Open with noeviction: %v", err)
	}
	_ = l.Close()
}

// tokensAcrossEviction takes and frees a lock, fills the server's memory
// until its fencing counter is evicted (bounded), takes it again and
// fails the test if the token did not grow.
func tokensAcrossEviction(ctx context.Context, t *testing.T, admin *redis.Client, l *distlock.Locker) {
	t.Helper()
	const key = "evicted"
	var last uint64
	for range 3 {
		le, err := l.TryAcquire(ctx, key)
		if err != nil {
			t.Fatal(err)
		}
		last = le.Token()
		if err := le.Release(ctx); err != nil {
			t.Fatal(err)
		}
	}
	fence := redisproto.KeysFor(DefaultPrefix, key).Fence
	filler := strings.Repeat("x", 1024)
	evicted := false
	for batch := 0; batch < 100 && !evicted; batch++ {
		_, err := admin.Pipelined(ctx, func(p redis.Pipeliner) error {
			for i := range 1000 {
				p.Set(ctx, fmt.Sprintf("filler:%d:%d", batch, i), filler, 0)
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		n, err := admin.Exists(ctx, fence).Result()
		if err != nil {
			t.Fatal(err)
		}
		evicted = n == 0
	}
	if !evicted {
		t.Fatal("the fencing counter was never evicted")
	}
	le, err := l.TryAcquire(ctx, key)
	if err != nil {
		t.Fatal(err)
	}
	defer le.Release(ctx)
	if le.Token() <= last {
		t.Errorf("the fencing counter was evicted: token %d after %d", le.Token(), last)
	}
}

func mustConfig(t *testing.T, c *redis.Client, name, value string) {
	t.Helper()
	if err := c.ConfigSet(testCtx(t, 5*time.Second), name, value).Err(); err != nil {
		t.Fatalf("CONFIG SET %s %s: %v", name, value, err)
	}
}

func usedMemory(t *testing.T, c *redis.Client) int64 {
	t.Helper()
	info, err := c.Info(testCtx(t, 5*time.Second), "memory").Result()
	if err != nil {
		t.Fatal(err)
	}
	for line := range strings.SplitSeq(info, "\r\n") {
		if v, ok := strings.CutPrefix(line, "used_memory:"); ok {
			n, err := strconv.ParseInt(v, 10, 64)
			if err != nil {
				t.Fatal(err)
			}
			return n
		}
	}
	t.Fatal("INFO memory has no used_memory")
	return 0
}
