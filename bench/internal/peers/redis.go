package peers

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/bsm/redislock"
	"github.com/go-redsync/redsync/v4"
	"github.com/go-redsync/redsync/v4/redis/goredis/v9"
	"github.com/redis/go-redis/v9"

	"github.com/distlock/distlock/backend"
	distredis "github.com/distlock/distlock/redislock"
)

func redisStore(u *backend.URL) (*Store, error) {
	db := 0
	if p := strings.Trim(u.Path, "/"); p != "" {
		n, err := strconv.Atoi(p)
		if err != nil {
			return nil, fmt.Errorf("redis database %q: %w", p, err)
		}
		db = n
	}
	pw, _ := u.Password()
	base := redis.Options{Addr: u.HostsWithDefaultPort(6379)[0], DB: db, Username: u.Username(), Password: pw}
	newClient := func(cut *cutter) *redis.Client {
		o := base
		o.Dialer = cut.dial
		return redis.NewClient(&o)
	}
	return &Store{
		Peers: []Peer{
			peer("redsync", "redsync/v4 Mutex, its defaults (32 tries 50–250 ms apart, tried again after they run out); lock expiry = the run's TTL",
				func(_ context.Context, ttl time.Duration, cut *cutter) (client, error) {
					c := newClient(cut)
					return &redsyncClient{c: c, rs: redsync.New(goredis.NewPool(c)), ttl: ttl}, nil
				}).from("github.com/go-redsync/redsync/v4", "0 (a shared pool)"),
			peer("bsm/redislock", "bsm/redislock Obtain with LinearBackoff(100 ms) while waiting (its README's example); TTL = the run's TTL",
				func(_ context.Context, ttl time.Duration, cut *cutter) (client, error) {
					c := newClient(cut)
					return &bsmClient{c: c, lc: redislock.New(c), ttl: ttl}, nil
				}).from("github.com/bsm/redislock", "0 (a shared pool)"),
		},
		Fenced: []Peer{
			fencedPeer("SET NX PX + INCR", RedisFencedAbout, func(_ context.Context, ttl time.Duration, cut *cutter) (client, error) {
				return &RedisFenced{C: newClient(cut), TTL: ttl}, nil
			}),
		},
		Conns: "0 (a shared pool)",
		Distlock: distlockPeer("redislock.New over redis.NewClient (go-redis defaults), one Locker per client; lease TTL = the run's TTL",
			func(context.Context, time.Duration) (backend.Driver, func(), error) {
				c := newClient(nil)
				// go-redis's defaults ignore ctx deadlines, so the driver
				// bounds its calls itself, and New warns about it
				// (docs/redis.md): once per client and round here, so the
				// report's output keeps it out.
				d, err := distredis.New(c, &distredis.Options{Logger: slog.New(slog.DiscardHandler)})
				if err != nil {
					_ = c.Close()
					return nil, nil, err
				}
				return d, func() { _ = c.Close() }, nil
			}),
		Floor: floor("PING", func() (func(context.Context) error, func(), error) {
			c := newClient(nil)
			return func(ctx context.Context) error { return c.Ping(ctx).Err() }, func() { _ = c.Close() }, nil
		}),
		Info: func(ctx context.Context) (Info, error) {
			c := newClient(nil)
			defer c.Close()
			return redisInfo(ctx, c)
		},
		Counters: func(ctx context.Context) (float64, float64, error) {
			c := newClient(nil)
			defer c.Close()
			return redisCounters(ctx, c)
		},
	}, nil
}

func redisInfo(ctx context.Context, c *redis.Client) (Info, error) {
	var info Info
	raw, err := c.Info(ctx, "server").Result()
	if err != nil {
		return info, err
	}
	for line := range strings.SplitSeq(raw, "\n") {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), "redis_version:"); ok {
			info.Version = "Redis " + v
		}
	}
	for _, name := range []string{"appendonly", "appendfsync", "save", "io-threads"} {
		m, err := c.ConfigGet(ctx, name).Result()
		if err != nil {
			continue
		}
		v := m[name]
		if v == "" {
			v = `""`
		}
		info.Settings = append(info.Settings, name+" "+v)
	}
	return info, nil
}

// redisCounters reads INFO: commands processed, and no fsync unless the
// append-only file is on (Redis does not count its fsyncs: NaN then).
func redisCounters(ctx context.Context, c *redis.Client) (requests, fsyncs float64, err error) {
	raw, err := c.Info(ctx, "stats", "persistence").Result()
	if err != nil {
		return 0, 0, err
	}
	fields := infoFields(raw)
	requests, err = strconv.ParseFloat(fields["total_commands_processed"], 64)
	if err != nil {
		return 0, 0, fmt.Errorf("INFO stats: total_commands_processed: %w", err)
	}
	fsyncs = math.NaN()
	if fields["aof_enabled"] == "0" {
		fsyncs = 0
	}
	return requests, fsyncs, nil
}

// infoFields splits the "name:value" lines of an INFO reply.
func infoFields(raw string) map[string]string {
	m := map[string]string{}
	for line := range strings.SplitSeq(raw, "\n") {
		if k, v, ok := strings.Cut(strings.TrimSpace(line), ":"); ok {
			m[k] = v
		}
	}
	return m
}

// redsyncClient is a redsync Redsync on its own client.
type redsyncClient struct {
	c   *redis.Client
	rs  *redsync.Redsync
	ttl time.Duration
}

func (x *redsyncClient) Acquire(ctx context.Context, key string) (func(context.Context) error, error) {
	for {
		m := x.rs.NewMutex(key, redsync.WithExpiry(x.ttl))
		err := m.LockContext(ctx)
		if err == nil {
			return func(ctx context.Context) error {
				ok, err := m.UnlockContext(ctx)
				if err == nil && !ok {
					err = errors.New("redsync: unlock failed")
				}
				return err
			}, nil
		}
		if ctx.Err() != nil {
			return nil, err
		}
		// redsync gives up after its 32 tries: try again, as a caller would.
	}
}

func (x *redsyncClient) Close()                              { _ = x.c.Close() }
func (x *redsyncClient) abandon(func(context.Context) error) { x.Close() }

// bsmClient is a bsm/redislock Client on its own client.
type bsmClient struct {
	c   *redis.Client
	lc  *redislock.Client
	ttl time.Duration
}

func (x *bsmClient) Acquire(ctx context.Context, key string) (func(context.Context) error, error) {
	opt := &redislock.Options{RetryStrategy: redislock.LinearBackoff(100 * time.Millisecond)}
	l, err := x.lc.Obtain(ctx, key, x.ttl, opt)
	if err != nil {
		return nil, err
	}
	return l.Release, nil
}

func (x *bsmClient) Close()                              { _ = x.c.Close() }
func (x *bsmClient) abandon(func(context.Context) error) { x.Close() }
