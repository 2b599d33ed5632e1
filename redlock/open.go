package redlock

import (
	"context"

	"github.com/redis/go-redis/v9"

	"github.com/distlock/distlock/backend"
	"github.com/distlock/distlock/internal/redisproto"
)

// init registers mode=redlock of the redis:// and rediss:// schemes.
func init() {
	redisproto.Register(open, redisproto.ModeRedlock)
}

// open opens a Redlock over the URL's hosts, one client each. It confirms
// that a majority of the nodes answer (PING) within ctx and
// dial_timeout+read_timeout, and that no node may evict keys
// (Config.Check).
func open(ctx context.Context, cfg redisproto.Config) (backend.Driver, error) {
	clients := make([]redis.UniversalClient, len(cfg.Addrs))
	for i, addr := range cfg.Addrs {
		clients[i] = redis.NewClient(cfg.Single(addr))
	}
	r, err := New(clients, &Options{Prefix: cfg.Prefix, Wait: cfg.Wait})
	if err != nil {
		redisproto.CloseAll(clients)
		return nil, err
	}
	r.owned = true
	if err := cfg.Check(ctx, clients, len(clients)/2+1); err != nil {
		_ = r.Close()
		return nil, err
	}
	return r, nil
}
