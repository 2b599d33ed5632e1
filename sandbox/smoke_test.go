package sandbox_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"
	"github.com/jackc/pgx/v5"

	"github.com/distlock/distlock/sandbox"
)

// One server of each kind answers a real client.

func TestRedisSmoke(t *testing.T) {
	g := start(t, sandbox.Spec{Kind: sandbox.Redis})
	ctx := testCtx(t, time.Minute)
	c := redisClient(t, g.Node(0).Addr())
	if err := c.Ping(ctx).Err(); err != nil {
		t.Fatalf("PING: %v", err)
	}
	if err := c.Set(ctx, "k", "v", 0).Err(); err != nil {
		t.Fatalf("SET: %v", err)
	}
	if got, err := c.Get(ctx, "k").Result(); err != nil || got != "v" {
		t.Fatalf("GET = %q, %v; want v", got, err)
	}
	if want := "redis://" + g.Node(0).Addr(); g.URL() != want {
		t.Errorf("URL = %q, want %q", g.URL(), want)
	}
}

func TestMariaDBSmoke(t *testing.T) {
	g := start(t, sandbox.Spec{Kind: sandbox.MariaDB})
	ctx := testCtx(t, time.Minute)
	db := mysqlDB(t, g.Node(0).Addr())
	var one int
	if err := db.QueryRowContext(ctx, "SELECT 1").Scan(&one); err != nil || one != 1 {
		t.Fatalf("SELECT 1 = %d, %v", one, err)
	}
	if _, err := db.ExecContext(ctx, "CREATE TABLE locks (name VARCHAR(64) PRIMARY KEY, owner VARCHAR(64) NOT NULL)"); err != nil {
		t.Fatalf("CREATE TABLE: %v", err)
	}
	if _, err := db.ExecContext(ctx, "INSERT INTO locks VALUES ('a', 'me')"); err != nil {
		t.Fatalf("INSERT: %v", err)
	}
	var owner string
	if err := db.QueryRowContext(ctx, "SELECT owner FROM locks WHERE name = 'a'").Scan(&owner); err != nil || owner != "me" {
		t.Fatalf("SELECT owner = %q, %v", owner, err)
	}
	if want := "mysql://root:" + sandbox.RootPassword + "@" + g.Node(0).Addr() + "/" + sandbox.Database; g.URL() != want {
		t.Errorf("URL = %q, want %q", g.URL(), want)
	}

	// The data survives a clean restart (the address may change).
	if err := g.Node(0).Stop(ctx); err != nil {
		t.Fatal(err)
	}
	if err := g.Node(0).Start(ctx); err != nil {
		t.Fatal(err)
	}
	db = mysqlDB(t, g.Node(0).Addr())
	if err := db.QueryRowContext(ctx, "SELECT owner FROM locks WHERE name = 'a'").Scan(&owner); err != nil || owner != "me" {
		t.Fatalf("SELECT owner after restart = %q, %v", owner, err)
	}
}

func TestPostgresSmoke(t *testing.T) {
	g := start(t, sandbox.Spec{Kind: sandbox.Postgres})
	ctx := testCtx(t, 2*time.Minute)
	want := "postgres://" + sandbox.PostgresUser + ":" + sandbox.PostgresPassword + "@" + g.Node(0).Addr() + "/" + sandbox.Database + "?sslmode=disable"
	if g.URL() != want {
		t.Errorf("URL = %q, want %q", g.URL(), want)
	}
	c := pgConn(t, ctx, g.URL())
	var version string
	if err := c.QueryRow(ctx, "SHOW server_version").Scan(&version); err != nil {
		t.Fatalf("SHOW server_version: %v", err)
	}
	t.Logf("PostgreSQL %s", version)
	if _, err := c.Exec(ctx, "CREATE TABLE locks (name text PRIMARY KEY, owner text NOT NULL)"); err != nil {
		t.Fatalf("CREATE TABLE: %v", err)
	}
	if _, err := c.Exec(ctx, "INSERT INTO locks VALUES ($1, $2)", "a", "me"); err != nil {
		t.Fatalf("INSERT: %v", err)
	}
	var owner string
	if err := c.QueryRow(ctx, "SELECT owner FROM locks WHERE name = 'a'").Scan(&owner); err != nil || owner != "me" {
		t.Fatalf("SELECT owner = %q, %v", owner, err)
	}

	// A wrong password is refused (scram-sha-256 on every connection).
	bad := strings.Replace(g.URL(), ":"+sandbox.PostgresPassword+"@", ":wrong@", 1)
	if c, err := pgx.Connect(ctx, bad); err == nil {
		c.Close(ctx)
		t.Error("a wrong password was accepted")
	} else if !strings.Contains(err.Error(), "password authentication failed") {
		t.Errorf("wrong password: %v, want password authentication failed", err)
	}

	// The data survives a clean restart (the address may change); the
	// open connection does not hold the stop up.
	began := time.Now()
	if err := g.Node(0).Stop(ctx); err != nil {
		t.Fatal(err)
	}
	if d := time.Since(began); d > 20*time.Second {
		t.Errorf("Stop took %v: a smart shutdown waiting for the client?", d)
	}
	if err := g.Node(0).Start(ctx); err != nil {
		t.Fatal(err)
	}
	c = pgConn(t, ctx, g.URL())
	if err := c.QueryRow(ctx, "SELECT owner FROM locks WHERE name = 'a'").Scan(&owner); err != nil || owner != "me" {
		t.Fatalf("SELECT owner after restart = %q, %v", owner, err)
	}
	// And a kill (crash recovery from the WAL).
	restart(t, ctx, g.Node(0))
	c = pgConn(t, ctx, g.URL())
	if err := c.QueryRow(ctx, "SELECT owner FROM locks WHERE name = 'a'").Scan(&owner); err != nil || owner != "me" {
		t.Fatalf("SELECT owner after a kill = %q, %v", owner, err)
	}
}

func TestZooKeeperSmoke(t *testing.T) {
	g := start(t, sandbox.Spec{Kind: sandbox.ZooKeeper})
	c := zkConn(t, g.Addrs())
	if _, err := c.Create("/smoke", []byte("v"), 0, zk.WorldACL(zk.PermAll)); err != nil {
		t.Fatalf("create: %v", err)
	}
	data, _, err := c.Get("/smoke")
	if err != nil || string(data) != "v" {
		t.Fatalf("get = %q, %v", data, err)
	}
	// A short session is granted: the tick is short.
	if got := c.SessionID(); got == 0 {
		t.Fatal("no session")
	}
}

func TestEtcdSmoke(t *testing.T) {
	g := start(t, sandbox.Spec{Kind: sandbox.Etcd})
	ctx := testCtx(t, time.Minute)
	c := etcdClient(t, g.Addrs())
	if _, err := c.Put(ctx, "k", "v"); err != nil {
		t.Fatalf("put: %v", err)
	}
	resp, err := c.Get(ctx, "k")
	if err != nil || len(resp.Kvs) != 1 || string(resp.Kvs[0].Value) != "v" {
		t.Fatalf("get = %v, %v", resp, err)
	}
	// Short leases work with the short election timeout.
	lease, err := c.Grant(ctx, 2)
	if err != nil {
		t.Fatalf("grant 2 s lease: %v", err)
	}
	if lease.TTL < 2 {
		t.Errorf("lease TTL = %d, want >= 2", lease.TTL)
	}
}

// A Stock spec gives the distribution's defaults where the sandbox
// otherwise shortens them: ZooKeeper's tick of 2 s (no session shorter
// than 4 s), MariaDB's 128 MiB buffer pool, Redis's RDB save schedule;
// PostgreSQL has its defaults either way.
func TestStockSettings(t *testing.T) {
	ctx := testCtx(t, 2*time.Minute)
	t.Run("ZooKeeper", func(t *testing.T) {
		g := start(t, sandbox.Spec{Kind: sandbox.ZooKeeper, Stock: true})
		// zk.Conn logs the negotiated timeout when the session starts.
		granted := make(chan string, 1)
		logger := zkLogFunc(func(format string, args ...any) {
			if msg := fmt.Sprintf(format, args...); strings.HasPrefix(msg, "authenticated:") {
				select {
				case granted <- msg:
				default:
				}
			}
		})
		c, _, err := zk.Connect(g.Addrs(), time.Second, zk.WithLogger(logger))
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		select {
		case msg := <-granted:
			if !strings.HasSuffix(msg, "timeout=4000") {
				t.Errorf("a 1 s session request: %q, want timeout=4000 (2 ticks of 2 s)", msg)
			}
		case <-ctx.Done():
			t.Fatal("no session")
		}
	})
	t.Run("MariaDB", func(t *testing.T) {
		g := start(t, sandbox.Spec{Kind: sandbox.MariaDB, Stock: true})
		var pool int64
		if err := mysqlDB(t, g.Node(0).Addr()).QueryRowContext(ctx, "SELECT @@innodb_buffer_pool_size").Scan(&pool); err != nil {
			t.Fatal(err)
		}
		if pool != 128<<20 {
			t.Errorf("innodb_buffer_pool_size = %d, want 128 MiB", pool)
		}
	})
	// PostgreSQL is the same with or without Stock: initdb's
	// postgresql.conf, nothing shortened.
	for _, stock := range []bool{true, false} {
		t.Run(fmt.Sprintf("Postgres/Stock=%v", stock), func(t *testing.T) {
			g := start(t, sandbox.Spec{Kind: sandbox.Postgres, Stock: stock})
			c := pgConn(t, ctx, g.URL())
			for name, want := range map[string]string{
				"shared_buffers": "128MB", "max_connections": "100", "fsync": "on",
				"synchronous_commit": "on", "idle_in_transaction_session_timeout": "0",
				"password_encryption": "scram-sha-256",
			} {
				var got string
				if err := c.QueryRow(ctx, "SELECT current_setting($1)", name).Scan(&got); err != nil {
					t.Fatal(err)
				}
				if got != want {
					t.Errorf("%s = %q, want %q (the default)", name, got, want)
				}
			}
		})
	}
	t.Run("Redis", func(t *testing.T) {
		g := start(t, sandbox.Spec{Kind: sandbox.Redis, Stock: true})
		got, err := redisClient(t, g.Node(0).Addr()).ConfigGet(ctx, "save").Result()
		if err != nil {
			t.Fatal(err)
		}
		if got["save"] != "3600 1 300 100 60 10000" {
			t.Errorf("save = %q, want Redis's default schedule", got["save"])
		}
	})
}

// zkLogFunc is a zk.Logger.
type zkLogFunc func(format string, args ...any)

func (f zkLogFunc) Printf(format string, args ...any) { f(format, args...) }
