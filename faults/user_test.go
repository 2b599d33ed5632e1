//go:build linux

package faults

import (
	"context"
	"database/sql"
	"fmt"

	"github.com/go-zookeeper/zk"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/redis/go-redis/v9"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/distlock/distlock"
	"github.com/distlock/distlock/backend"
	"github.com/distlock/distlock/etcdlock"
	"github.com/distlock/distlock/redislock"
	"github.com/distlock/distlock/redlock"
	"github.com/distlock/distlock/sandbox"
	"github.com/distlock/distlock/sqllock"
	"github.com/distlock/distlock/zklock"

	_ "github.com/go-sql-driver/mysql"
)

// The client profiles (DISTLOCK_FAULTS_PROFILE).
const (
	profileOpen = "open" // distlock.Open(URL): the store client Open makes
	profileUser = "user" // a store client made as a service makes it, passed to the package's New
)

// userLocker makes the Locker of a "user" client: a store client built
// the way a service builds it, with nothing but the address (the client
// library's defaults for every timeout, pool and retry), passed to the
// backend package's New, as the docs recommend to users who already have
// a client. Such a client may not honour ctx deadlines (go-redis without
// ContextTimeoutEnabled waits out its 3 s ReadTimeout). close closes the
// store client; call it after the Locker's Close.
func userLocker(ctx context.Context, cfg clientConfig) (l *distlock.Locker, close func(), err error) {
	var d backend.Driver
	var closers []func()
	close = func() {
		for i := len(closers) - 1; i >= 0; i-- {
			closers[i]()
		}
	}
	defer func() {
		if err != nil {
			close()
		}
	}()
	switch cfg.Store {
	case "redis":
		c := redis.NewClient(&redis.Options{Addr: cfg.Addrs[0]})
		closers = append(closers, func() { _ = c.Close() })
		d, err = redislock.New(c, nil)
	case "redlock":
		var cs []redis.UniversalClient
		for _, a := range cfg.Addrs {
			c := redis.NewClient(&redis.Options{Addr: a})
			closers = append(closers, func() { _ = c.Close() })
			cs = append(cs, c)
		}
		d, err = redlock.New(cs, nil)
	case "redis-cluster":
		c := redis.NewClusterClient(&redis.ClusterOptions{Addrs: cfg.Addrs})
		closers = append(closers, func() { _ = c.Close() })
		d, err = redislock.New(c, nil)
	case "mysql", "mysql-session":
		// The DSN a service has: user, password, address, database.
		db, oerr := sql.Open("mysql", "root:"+sandbox.RootPassword+"@tcp("+cfg.Addrs[0]+")/"+sandbox.Database)
		if oerr != nil {
			return nil, close, oerr
		}
		closers = append(closers, func() { _ = db.Close() })
		d, err = sqllock.New(ctx, db, &sqllock.Options{Session: cfg.Store == "mysql-session"})
	case "postgres", "postgres-session":
		pool, perr := pgxpool.New(ctx, sandbox.PostgresURL(cfg.Addrs[0]))
		if perr != nil {
			return nil, close, perr
		}
		closers = append(closers, pool.Close)
		d, err = sqllock.NewPool(ctx, pool, &sqllock.Options{Session: cfg.Store == "postgres-session"})
	case "etcd":
		c, cerr := clientv3.New(clientv3.Config{Endpoints: cfg.Addrs})
		if cerr != nil {
			return nil, close, cerr
		}
		closers = append(closers, func() { _ = c.Close() })
		// The lock TTL is the driver's lease's (etcdlock.Options.TTL,
		// as the URL's ttl sets it for Open); its default is far longer.
		d, err = etcdlock.New(c, &etcdlock.Options{TTL: cfg.TTL})
	case "zk":
		// The session timeout is the locks' TTL here (the sandbox's
		// servers grant what is asked, which zklock.New needs to know).
		conn, events, cerr := zk.Connect(cfg.Addrs, cfg.TTL)
		if cerr != nil {
			return nil, close, cerr
		}
		closers = append(closers, conn.Close)
		if err := awaitSession(ctx, events); err != nil {
			return nil, close, err
		}
		d, err = zklock.New(conn, &zklock.Options{SessionTimeout: cfg.TTL})
	default:
		return nil, close, fmt.Errorf("no user-made client for store %q", cfg.Store)
	}
	if err != nil {
		return nil, close, err
	}
	return distlock.New(d, distlock.WithDefaultTTL(cfg.TTL)), close, nil
}

// awaitSession waits for the first session on a new ZooKeeper connection,
// as zklock.New's doc asks, then keeps draining the connection's events.
func awaitSession(ctx context.Context, events <-chan zk.Event) error {
	for {
		select {
		case <-ctx.Done():
			return fmt.Errorf("zk: no session: %w", ctx.Err())
		case ev, ok := <-events:
			if !ok {
				return fmt.Errorf("zk: connection closed before a session")
			}
			if ev.State == zk.StateHasSession {
				go func() {
					for range events {
					}
				}()
				return nil
			}
		}
	}
}

// userStore is the store kind a target's user clients are made for ("":
// the target has no user-made client).
func userStore(tg target) string {
	if tg.spec == nil || tg.wrap != nil {
		return ""
	}
	return tg.store
}
