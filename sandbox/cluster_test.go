package sandbox_test

import (
	"fmt"
	"net"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"
	"github.com/redis/go-redis/v9"

	"github.com/distlock/distlock/sandbox"
)

// Clusters: every member serves, and data written through one member is
// visible through another.

func TestEtcdCluster(t *testing.T) {
	g := start(t, sandbox.Spec{Kind: sandbox.Etcd, Nodes: 3})
	ctx := testCtx(t, 2*time.Minute)
	addrs := g.Addrs()
	if _, err := etcdClient(t, addrs[:1]).Put(ctx, "k", "v"); err != nil {
		t.Fatalf("put via %s: %v", addrs[0], err)
	}
	other := etcdClient(t, addrs[2:])
	resp, err := other.Get(ctx, "k")
	if err != nil || len(resp.Kvs) != 1 || string(resp.Kvs[0].Value) != "v" {
		t.Fatalf("get via %s = %v, %v", addrs[2], resp, err)
	}
	members, err := other.MemberList(ctx)
	if err != nil || len(members.Members) != 3 {
		t.Fatalf("member list = %v, %v; want 3 members", members, err)
	}
	if want := "etcd://" + strings.Join(addrs, ","); g.URL() != want {
		t.Errorf("URL = %q, want %q", g.URL(), want)
	}

	// A member stopped and started again rejoins; the others keep quorum.
	if err := g.Node(1).Stop(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := other.Put(ctx, "k2", "during outage"); err != nil {
		t.Fatalf("put with 2 of 3 members: %v", err)
	}
	if err := g.Node(1).Start(ctx); err != nil {
		t.Fatal(err)
	}
	if err := g.Wait(ctx); err != nil {
		t.Fatal(err)
	}
	resp, err = etcdClient(t, []string{g.Node(1).Addr()}).Get(ctx, "k2")
	if err != nil || len(resp.Kvs) != 1 {
		t.Fatalf("get k2 via restarted member = %v, %v", resp, err)
	}
}

func TestZooKeeperEnsemble(t *testing.T) {
	g := start(t, sandbox.Spec{Kind: sandbox.ZooKeeper, Nodes: 3})
	addrs := g.Addrs()
	if _, err := zkConn(t, addrs[:1]).Create("/ens", []byte("v"), 0, zk.WorldACL(zk.PermAll)); err != nil {
		t.Fatalf("create via %s: %v", addrs[0], err)
	}
	other := zkConn(t, addrs[2:])
	if _, err := other.Sync("/ens"); err != nil {
		t.Fatalf("sync: %v", err)
	}
	data, _, err := other.Get("/ens")
	if err != nil || string(data) != "v" {
		t.Fatalf("get via %s = %q, %v", addrs[2], data, err)
	}
	if want := "zk://" + strings.Join(addrs, ","); g.URL() != want {
		t.Errorf("URL = %q, want %q", g.URL(), want)
	}

	// A killed member comes back and the ensemble serves on all three.
	ctx := testCtx(t, 2*time.Minute)
	if err := g.Node(0).Kill(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := other.Set("/ens", []byte("w"), -1); err != nil {
		t.Fatalf("set with 2 of 3 members: %v", err)
	}
	if err := g.Node(0).Start(ctx); err != nil {
		t.Fatal(err)
	}
	if err := g.Wait(ctx); err != nil {
		t.Fatal(err)
	}
	back := zkConn(t, []string{g.Node(0).Addr()})
	if _, err := back.Sync("/ens"); err != nil {
		t.Fatalf("sync via restarted member: %v", err)
	}
	if data, _, err := back.Get("/ens"); err != nil || string(data) != "w" {
		t.Fatalf("get via restarted member = %q, %v", data, err)
	}
}

func TestRedisCluster(t *testing.T) {
	g := start(t, sandbox.Spec{Kind: sandbox.Redis, Topology: sandbox.Cluster})
	ctx := testCtx(t, time.Minute)
	c := redis.NewClusterClient(&redis.ClusterOptions{
		Addrs: g.Addrs(), Protocol: 2, DisableIdentity: true,
		DialTimeout: 2 * time.Second, ReadTimeout: 2 * time.Second,
	})
	t.Cleanup(func() { c.Close() })
	for i := range 50 {
		key := fmt.Sprintf("key-%d", i)
		if err := c.Set(ctx, key, i, 0).Err(); err != nil {
			t.Fatalf("SET %s: %v", key, err)
		}
	}
	// The slots are spread over every node, each announced at an address
	// this host can reach.
	shards, err := redisClient(t, g.Node(0).Addr()).ClusterShards(ctx).Result()
	if err != nil {
		t.Fatal(err)
	}
	var announced []string
	for _, s := range shards {
		for _, n := range s.Nodes {
			if len(s.Slots) > 0 && n.Role == "master" {
				announced = append(announced, net.JoinHostPort(n.Endpoint, strconv.FormatInt(n.Port, 10)))
			}
		}
	}
	for _, addr := range g.Addrs() {
		if !slices.Contains(announced, addr) {
			t.Errorf("node %s serves no slot; shards announce %v", addr, announced)
		}
	}
	var total int
	for _, addr := range g.Addrs() {
		n, err := redisClient(t, addr).DBSize(ctx).Result()
		if err != nil {
			t.Fatal(err)
		}
		total += int(n)
	}
	if total != 50 {
		t.Errorf("keys on the nodes = %d, want 50", total)
	}
}

func TestRedisReplica(t *testing.T) {
	g := start(t, sandbox.Spec{Kind: sandbox.Redis, Topology: sandbox.Replica})
	ctx := testCtx(t, time.Minute)
	primary, replica := redisClient(t, g.Node(0).Addr()), redisClient(t, g.Node(1).Addr())
	if err := primary.Set(ctx, "k", "v", 0).Err(); err != nil {
		t.Fatal(err)
	}
	if n, err := primary.Wait(ctx, 1, time.Second).Result(); err != nil || n != 1 {
		t.Fatalf("WAIT 1 = %d, %v", n, err)
	}
	if got, err := replica.Get(ctx, "k").Result(); err != nil || got != "v" {
		t.Fatalf("GET on replica = %q, %v", got, err)
	}
	if err := replica.Set(ctx, "k", "w", 0).Err(); err == nil || !strings.Contains(err.Error(), "READONLY") {
		t.Fatalf("SET on replica = %v, want READONLY", err)
	}
	if err := g.Promote(ctx, 1); err != nil {
		t.Fatal(err)
	}
	if err := replica.Set(ctx, "k", "w", 0).Err(); err != nil {
		t.Fatalf("SET on promoted replica: %v", err)
	}
	if g.URL() != sandbox.RedisURL(g.Node(0).Addr()) {
		t.Errorf("URL = %q, want the primary's", g.URL())
	}
}

func TestRedisIndependent(t *testing.T) {
	g := start(t, sandbox.Spec{Kind: sandbox.Redis, Nodes: 3})
	ctx := testCtx(t, time.Minute)
	ids := map[string]bool{}
	for _, addr := range g.Addrs() {
		info, err := redisClient(t, addr).Info(ctx, "server").Result()
		if err != nil {
			t.Fatal(err)
		}
		_, rest, _ := strings.Cut(info, "run_id:")
		id, _, _ := strings.Cut(rest, "\r\n")
		ids[id] = true
	}
	if len(ids) != 3 {
		t.Errorf("%d distinct servers, want 3", len(ids))
	}
	if want := "redis://" + strings.Join(g.Addrs(), ","); g.URL() != want {
		t.Errorf("URL = %q, want %q", g.URL(), want)
	}
}
