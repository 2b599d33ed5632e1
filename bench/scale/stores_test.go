package scale

import (
	"bufio"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/go-sql-driver/mysql"
	"github.com/go-zookeeper/zk"
	_ "github.com/jackc/pgx/v5/stdlib"
	"github.com/redis/go-redis/v9"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.opentelemetry.io/otel/metric"
	"go.uber.org/zap"

	"github.com/distlock/distlock"
	"github.com/distlock/distlock/etcdlock"
	"github.com/distlock/distlock/memlock"
	"github.com/distlock/distlock/redislock"
	"github.com/distlock/distlock/sandbox"
	"github.com/distlock/distlock/sqllock"
	"github.com/distlock/distlock/zklock"
)

// A store is one backend of the scale run: how to start its server, make a
// client the way a user makes one, and read the server's request counter.
type store struct {
	name string
	kind sandbox.Kind // "" for mem: no server

	// held returns the numbers of leases one Locker holds in the run.
	held func(full bool) []int
	// heldLimit explains where one Locker stops holding more (docs).
	heldLimit string
	// maxClients caps the clients of the acquisition curve (0: none), and
	// clientLimit says why.
	maxClients  int
	clientLimit string
	// parallel is how many acquisitions run at once while one Locker
	// takes its n leases.
	parallel int
	// counter names the server's request counter (serverOps).
	counter string

	g     *sandbox.Group
	mem   *memlock.Store
	reads int64 // MariaDB: status reads so far (each counts in Questions)
}

func sizes(full bool, short, long []int) []int {
	if full {
		return long
	}
	return short
}

func manyHeld(full bool) []int { return sizes(full, []int{1000}, []int{1000, 10000, 100000}) }

var stores = []*store{
	{
		name: "mem", held: manyHeld, parallel: 8, counter: "-",
		heldLimit: "memory only",
	},
	{
		name: "redis", kind: sandbox.Redis, held: manyHeld, parallel: 64,
		counter:   "INFO commandstats: calls of EVAL/EVALSHA (the scripts, not the commands they run)",
		heldLimit: "Redis memory (maxmemory unset)",
	},
	{
		name: "mariadb", kind: sandbox.MariaDB, parallel: 16,
		held: func(full bool) []int { return sizes(full, []int{10, 100}, []int{10, 30, 100}) },
		heldLimit: "one pinned connection (an open transaction) per lease: " +
			"max_connections (151 by default) less the pool's other connections",
		maxClients:  64,
		clientLimit: "each client is its own *sql.DB, which pins a connection per lease and keeps spares: 256 clients would exceed max_connections=151",
		counter:     "SHOW GLOBAL STATUS Questions + Com_admin_commands",
	},
	{
		// Session mode: every lease a GET_LOCK on one of 2 shared sessions.
		name: "mariadb-session", kind: sandbox.MariaDB, held: manyHeld, parallel: 16,
		heldLimit: "none met: GET_LOCK names on Sessions (2) shared connections, renewed by one statement per session per round",
		counter:   "SHOW GLOBAL STATUS Questions + Com_admin_commands",
	},
	{
		// Session mode: every lease a session-level advisory lock on one
		// of 2 shared sessions.
		name: "postgres-session", kind: sandbox.Postgres, held: manyHeld, parallel: 16,
		heldLimit: "the server's shared lock table (max_locks_per_transaction × max_connections slots, 6,400+ on a stock server, and what spare shared memory holds)",
		counter:   "pg_stat_database xact_commit + xact_rollback (one per statement the Driver sends)",
	},
	{
		name: "etcd", kind: sandbox.Etcd, held: manyHeld, parallel: 64,
		counter:   "/metrics grpc_server_msg_received_total",
		heldLimit: "etcd's backend quota (2 GiB by default)",
	},
	{
		name: "zookeeper", kind: sandbox.ZooKeeper, parallel: 64,
		held:       func(full bool) []int { return sizes(full, []int{1000}, []int{1000, 3000, 10000}) },
		counter:    "mntr zk_packets_received",
		maxClients: 56,
		clientLimit: "ZooKeeper's maxClientCnxns (60 connections per client address by default) refuses more: " +
			"every client is its own session on its own connection",
		heldLimit: "renewal throughput: each lease's renewal is its own Sync and Exists (no batch), " +
			"so a round of n leases must fit in TTL/6 before the leases go in doubt",
	},
}

// start starts s's server; close stops it.
func (s *store) start(ctx context.Context) (stop func() error, err error) {
	if s.kind == "" {
		s.mem = memlock.NewStore()
		return func() error { return nil }, nil
	}
	g, err := sandbox.Start(ctx, sandbox.Spec{Kind: s.kind, Stock: true})
	if err != nil {
		return nil, err
	}
	s.g = g
	return g.Close, nil
}

// client is one user's Locker over its own driver and store client, with
// the store's bare round trip on that client for a baseline.
type client struct {
	l     *distlock.Locker
	conns func() int                      // the open server connections of the client (nil: not known)
	ping  func(ctx context.Context) error // nil: no round trip (mem)
	close func()
}

func (c *client) Close() {
	_ = c.l.Close()
	if c.close != nil {
		c.close()
	}
}

type quiet struct{}

func (quiet) Printf(string, ...any) {}

// open makes a client as a user would: the store's client with its
// defaults, the driver's New over it, a Locker over the driver.
func (s *store) open(ctx context.Context, ttl time.Duration, mp metric.MeterProvider) (*client, error) {
	opts := []distlock.LockerOption{distlock.WithDefaultTTL(ttl)}
	if mp != nil {
		opts = append(opts, distlock.WithMeterProvider(mp))
	}
	switch s.name {
	case "mem":
		d, err := s.mem.NewDriver(nil)
		if err != nil {
			return nil, err
		}
		return &client{l: distlock.New(d, opts...)}, nil
	case "redis":
		c := redis.NewClient(&redis.Options{Addr: s.g.Addrs()[0]})
		d, err := redislock.New(c, nil)
		if err != nil {
			_ = c.Close()
			return nil, err
		}
		return &client{l: distlock.New(d, opts...), ping: func(ctx context.Context) error { return c.Ping(ctx).Err() },
			close: func() { _ = c.Close() }}, nil
	case "mariadb":
		db, err := sql.Open("mysql", s.g.MySQLDSN())
		if err != nil {
			return nil, err
		}
		d, err := sqllock.New(ctx, db, nil)
		if err != nil {
			_ = db.Close()
			return nil, err
		}
		return &client{l: distlock.New(d, opts...), ping: db.PingContext, close: func() { _ = db.Close() }}, nil
	case "mariadb-session", "postgres-session":
		driverName, dsn := "mysql", ""
		if s.name == "postgres-session" {
			driverName, dsn = "pgx", sandbox.PostgresURL(s.g.Addrs()[0])
		} else {
			dsn = s.g.MySQLDSN()
		}
		db, err := sql.Open(driverName, dsn)
		if err != nil {
			return nil, err
		}
		d, err := sqllock.New(ctx, db, &sqllock.Options{Session: true, Table: "distlock_session"})
		if err != nil {
			_ = db.Close()
			return nil, err
		}
		conns := func() int { return db.Stats().OpenConnections }
		return &client{l: distlock.New(d, opts...), ping: db.PingContext, conns: conns, close: func() { _ = db.Close() }}, nil
	case "etcd":
		cli, err := clientv3.New(clientv3.Config{Endpoints: s.g.Addrs(), DialTimeout: 10 * time.Second, Logger: zap.NewNop()})
		if err != nil {
			return nil, err
		}
		d, err := etcdlock.New(cli, &etcdlock.Options{Prefix: "scale", TTL: ttl})
		if err != nil {
			_ = cli.Close()
			return nil, err
		}
		ping := func(ctx context.Context) error { _, err := cli.Get(ctx, "scale-ping"); return err }
		return &client{l: distlock.New(d, opts...), ping: ping, close: func() { _ = cli.Close() }}, nil
	case "zookeeper":
		conn, err := zkConnect(ctx, s.g.Addrs(), ttl)
		if err != nil {
			return nil, err
		}
		d, err := zklock.New(conn, &zklock.Options{Base: "/scale", SessionTimeout: ttl, WatchRenewals: *zkWatch})
		if err != nil {
			conn.Close()
			return nil, err
		}
		ping := func(context.Context) error { _, _, err := conn.Exists("/"); return err }
		return &client{l: distlock.New(d, opts...), ping: ping, close: conn.Close}, nil
	}
	return nil, fmt.Errorf("unknown store %q", s.name)
}

// zkConnect opens a session and waits until the server granted it.
func zkConnect(ctx context.Context, addrs []string, timeout time.Duration) (*zk.Conn, error) {
	conn, events, err := zk.Connect(addrs, timeout, zk.WithLogger(quiet{}), zk.WithLogInfo(false))
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	for {
		select {
		case ev := <-events:
			if ev.State == zk.StateHasSession {
				go func() { // keep go-zookeeper's event channel drained
					for range events {
					}
				}()
				return conn, nil
			}
		case <-ctx.Done():
			conn.Close()
			return nil, errors.New("no ZooKeeper session within 30s")
		}
	}
}

// serverOps reads the server's request counter; false for mem.
func (s *store) serverOps(ctx context.Context) (int64, bool, error) {
	switch s.name {
	case "redis":
		c := redis.NewClient(&redis.Options{Addr: s.g.Addrs()[0]})
		defer c.Close()
		// Every request distlock sends is a script (EVALSHA): count those,
		// not the commands the scripts run inside (total_commands_processed
		// counts both: 5 per renewal).
		info, err := c.Info(ctx, "commandstats").Result()
		if err != nil {
			return 0, true, err
		}
		var n int64
		for line := range strings.Lines(info) {
			name, rest, ok := strings.Cut(strings.TrimSpace(line), ":calls=")
			if !ok || !(strings.HasPrefix(name, "cmdstat_eval") || strings.HasPrefix(name, "cmdstat_fcall")) {
				continue
			}
			calls, _, _ := strings.Cut(rest, ",")
			v, err := strconv.ParseInt(calls, 10, 64)
			if err != nil {
				return 0, true, err
			}
			n += v
		}
		return n, true, nil
	case "postgres-session":
		db, err := sql.Open("pgx", sandbox.PostgresURL(s.g.Addrs()[0]))
		if err != nil {
			return 0, true, err
		}
		defer db.Close()
		var n int64
		err = db.QueryRowContext(ctx, "SELECT sum(xact_commit + xact_rollback)::bigint FROM pg_stat_database").Scan(&n)
		s.reads++
		return n - s.reads, true, err
	case "mariadb", "mariadb-session":
		cfg, err := mysql.ParseDSN(s.g.MySQLDSN())
		if err != nil {
			return 0, true, err
		}
		conn, err := mysql.NewConnector(cfg)
		if err != nil {
			return 0, true, err
		}
		db := sql.OpenDB(conn)
		defer db.Close()
		// Questions leaves out COM_PING (a held lock's renewal), which
		// Com_admin_commands counts.
		rows, err := db.QueryContext(ctx, "SHOW GLOBAL STATUS WHERE Variable_name IN ('Questions', 'Com_admin_commands')")
		if err != nil {
			return 0, true, err
		}
		defer rows.Close()
		var total int64
		for rows.Next() {
			var name string
			var n int64
			if err := rows.Scan(&name, &n); err != nil {
				return 0, true, err
			}
			total += n
		}
		s.reads++
		return total - s.reads, true, rows.Err()
	case "etcd":
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+s.g.Addrs()[0]+"/metrics", nil)
		if err != nil {
			return 0, true, err
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return 0, true, err
		}
		defer resp.Body.Close()
		var sum int64
		sc := bufio.NewScanner(resp.Body)
		sc.Buffer(make([]byte, 64*1024), 1<<20)
		found := false
		for sc.Scan() {
			line := sc.Text()
			if !strings.HasPrefix(line, "grpc_server_msg_received_total{") {
				continue
			}
			found = true
			f := strings.Fields(line)
			v, err := strconv.ParseFloat(f[len(f)-1], 64)
			if err != nil {
				return 0, true, err
			}
			sum += int64(v)
		}
		if !found {
			return 0, true, errors.New("etcd /metrics has no grpc_server_msg_received_total")
		}
		return sum, true, sc.Err()
	case "zookeeper":
		var d net.Dialer
		conn, err := d.DialContext(ctx, "tcp", s.g.Addrs()[0])
		if err != nil {
			return 0, true, err
		}
		defer conn.Close()
		_ = conn.SetDeadline(time.Now().Add(10 * time.Second))
		if _, err := conn.Write([]byte("mntr")); err != nil {
			return 0, true, err
		}
		out, err := io.ReadAll(conn)
		if err != nil {
			return 0, true, err
		}
		n, err := field(string(out), "zk_packets_received")
		return n, true, err
	}
	return 0, false, nil
}

// field returns the integer after name in text (name, then ':' or
// whitespace, then the number).
func field(text, name string) (int64, error) {
	for line := range strings.Lines(text) {
		if rest, ok := strings.CutPrefix(line, name); ok {
			return strconv.ParseInt(strings.Trim(rest, ": \t\r\n"), 10, 64)
		}
	}
	return 0, fmt.Errorf("no %q in the server's answer", name)
}
