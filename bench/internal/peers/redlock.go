package peers

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/go-redsync/redsync/v4"
	redsyncredis "github.com/go-redsync/redsync/v4/redis"
	"github.com/go-redsync/redsync/v4/redis/goredis/v9"
	"github.com/redis/go-redis/v9"

	"github.com/distlock/distlock/backend"
	distredlock "github.com/distlock/distlock/redlock"
)

// redlockStore is Redlock over the URL's hosts, independent primaries
// (redis://h1,h2,h3?mode=redlock): redsync with a pool per node beside
// distlock's redlock.New, and a PING to every node at once as the floor.
func redlockStore(u *backend.URL) (*Store, error) {
	pw, _ := u.Password()
	hosts := u.HostsWithDefaultPort(6379)
	newClients := func(cut *cutter) []*redis.Client {
		cs := make([]*redis.Client, len(hosts))
		for i, h := range hosts {
			cs[i] = redis.NewClient(&redis.Options{Addr: h, Username: u.Username(), Password: pw, Dialer: cut.dial})
		}
		return cs
	}
	closeAll := func(cs []*redis.Client) {
		for _, c := range cs {
			_ = c.Close()
		}
	}
	n := len(hosts)
	return &Store{
		Peers: []Peer{
			peer("redsync", fmt.Sprintf("redsync/v4 Mutex over %d pools (its Redlock), its defaults (32 tries 50–250 ms apart, tried again after they run out); lock expiry = the run's TTL", n),
				func(_ context.Context, ttl time.Duration, cut *cutter) (client, error) {
					cs := newClients(cut)
					pools := make([]redsyncredis.Pool, len(cs))
					for i, c := range cs {
						pools[i] = goredis.NewPool(c)
					}
					return &redlockClient{redsyncClient: redsyncClient{rs: redsync.New(pools...), ttl: ttl}, cs: cs}, nil
				}).from("github.com/go-redsync/redsync/v4", "0 (a shared pool per node)"),
		},
		Conns: "0 (a shared pool per node)",
		Distlock: distlockPeer(fmt.Sprintf("redlock.New over %d redis.NewClient (go-redis defaults), one Locker per set of clients; lease TTL = the run's TTL", n),
			func(context.Context, time.Duration) (backend.Driver, func(), error) {
				cs := newClients(nil)
				ucs := make([]redis.UniversalClient, len(cs))
				for i, c := range cs {
					ucs[i] = c
				}
				d, err := distredlock.New(ucs, nil)
				if err != nil {
					closeAll(cs)
					return nil, nil, err
				}
				return d, func() { closeAll(cs) }, nil
			}),
		Floor: floor(fmt.Sprintf("PING ×%d", n), func() (func(context.Context) error, func(), error) {
			cs := newClients(nil)
			return func(ctx context.Context) error {
					return each(cs, func(c *redis.Client) error { return c.Ping(ctx).Err() })
				},
				func() { closeAll(cs) }, nil
		}),
		Info: func(ctx context.Context) (Info, error) {
			c := redis.NewClient(&redis.Options{Addr: hosts[0], Username: u.Username(), Password: pw})
			defer c.Close()
			info, err := redisInfo(ctx, c)
			info.Settings = append(info.Settings, fmt.Sprintf("%d independent primaries", n))
			return info, err
		},
		Counters: func(ctx context.Context) (float64, float64, error) {
			cs := newClients(nil)
			defer closeAll(cs)
			var mu sync.Mutex
			var requests, fsyncs float64
			err := each(cs, func(c *redis.Client) error {
				r, f, err := redisCounters(ctx, c)
				mu.Lock()
				requests, fsyncs = requests+r, fsyncs+f
				mu.Unlock()
				return err
			})
			return requests, fsyncs, err
		},
	}, nil
}

// each runs f on every client at once and returns the first error.
func each(cs []*redis.Client, f func(*redis.Client) error) error {
	errs := make([]error, len(cs))
	var wg sync.WaitGroup
	for i, c := range cs {
		wg.Go(func() { errs[i] = f(c) })
	}
	wg.Wait()
	return firstError(errs)
}

func firstError(errs []error) error {
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}

// redlockClient is redsync over several clients.
type redlockClient struct {
	redsyncClient
	cs []*redis.Client
}

func (x *redlockClient) Close() {
	for _, c := range x.cs {
		_ = c.Close()
	}
}
func (x *redlockClient) abandon(func(context.Context) error) { x.Close() }
