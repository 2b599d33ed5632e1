package redislock

import (
	"context"

	"github.com/redis/go-redis/v9"

	"github.com/distlock/distlock/backend"
	"github.com/distlock/distlock/internal/redisproto"
)

// init registers the redis:// and rediss:// schemes for a single server
// and a Cluster (mode=redlock is package redlock's).
func init() {
	redisproto.Register(open, redisproto.ModeSingle, redisproto.ModeCluster)
}

// open opens a single server or a Cluster from its URL config. It
// confirms the store answers (PING) within ctx and
// dial_timeout+read_timeout, and that no server it reaches may evict keys
// (Config.Check).
func open(ctx context.Context, cfg redisproto.Config) (backend.Driver, error) {
	var c redis.UniversalClient
	if cfg.Mode == redisproto.ModeCluster {
		c = redis.NewClusterClient(cfg.Cluster())
	} else {
		c = redis.NewClient(cfg.Single(cfg.Addrs[0]))
	}
	d, err := New(c, &Options{Prefix: cfg.Prefix, Wait: cfg.Wait, WaitReplicas: cfg.WaitReplicas, WaitTimeout: cfg.WaitTimeout})
	if err != nil {
		_ = c.Close()
		return nil, err
	}
	d.owned = true
	if err := cfg.Check(ctx, []redis.UniversalClient{c}, 1); err != nil {
		_ = d.Close()
		return nil, err
	}
	return d, nil
}
