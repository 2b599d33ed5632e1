package sandbox_test

import (
	"context"
	"database/sql"
	"io"
	"log"
	"testing"
	"time"

	_ "github.com/go-sql-driver/mysql"
	"github.com/go-zookeeper/zk"
	"github.com/jackc/pgx/v5"
	"github.com/redis/go-redis/v9"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/distlock/distlock/sandbox"
)

// Real clients for the servers under test, each closed in t.Cleanup.

func redisClient(t *testing.T, addr string) *redis.Client {
	t.Helper()
	c := newQuietRedis(addr)
	t.Cleanup(func() { c.Close() })
	return c
}

func newQuietRedis(addr string) *redis.Client {
	return redis.NewClient(&redis.Options{
		Addr: addr, Protocol: 2, DisableIdentity: true,
		DialTimeout: 2 * time.Second, ReadTimeout: 2 * time.Second, MaxRetries: -1,
	})
}

func mysqlDB(t *testing.T, addr string) *sql.DB {
	t.Helper()
	db, err := sql.Open("mysql", sandbox.MySQLDSN(addr))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return db
}

// pgConn connects to a PostgreSQL server by URL (pgx's own connection,
// as a user of the driver makes it); the connection is closed in
// t.Cleanup.
func pgConn(t *testing.T, ctx context.Context, url string) *pgx.Conn {
	t.Helper()
	c, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatalf("connect %s: %v", url, err)
	}
	t.Cleanup(func() { c.Close(context.Background()) })
	return c
}

func zkConn(t *testing.T, addrs []string) *zk.Conn {
	t.Helper()
	quiet := zk.WithLogger(log.New(io.Discard, "", 0))
	c, _, err := zk.Connect(addrs, 4*time.Second, quiet)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	return c
}

func etcdClient(t *testing.T, addrs []string) *clientv3.Client {
	t.Helper()
	c, err := clientv3.New(clientv3.Config{
		Endpoints:   addrs,
		DialTimeout: 5 * time.Second,
		Logger:      zap.NewNop(),
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// restart kills n and starts it again.
func restart(t *testing.T, ctx context.Context, n sandbox.Node) {
	t.Helper()
	if err := n.Kill(ctx); err != nil {
		t.Fatal(err)
	}
	if err := n.Start(ctx); err != nil {
		t.Fatal(err)
	}
}

// testCtx is a context bounded well below the test binary's timeout.
func testCtx(t *testing.T, d time.Duration) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

// start starts spec with the provider chosen by DISTLOCK_SANDBOX and logs
// what it got.
func start(t *testing.T, spec sandbox.Spec) *sandbox.Group {
	t.Helper()
	began := time.Now()
	g := sandbox.StartT(t, spec)
	t.Logf("%s: up in %v", g, time.Since(began).Round(time.Millisecond))
	return g
}
