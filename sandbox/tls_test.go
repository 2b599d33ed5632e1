package sandbox_test

import (
	"context"
	"crypto/tls"
	"io"
	"net"
	"net/url"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/distlock/distlock/sandbox"
)

// tlsRedis returns a client of the TLS group's server at addr.
func tlsRedis(t *testing.T, g *sandbox.Group, addr string) *redis.Client {
	t.Helper()
	c := redis.NewClient(&redis.Options{
		Addr: addr, Protocol: 2, DisableIdentity: true, TLSConfig: g.ClientTLS(),
		DialTimeout: 2 * time.Second, ReadTimeout: 2 * time.Second, MaxRetries: -1,
	})
	t.Cleanup(func() { c.Close() })
	return c
}

func TestRedisTLS(t *testing.T) {
	g := start(t, sandbox.Spec{Kind: sandbox.Redis, TLS: true})
	ctx := testCtx(t, time.Minute)
	files, ok := g.TLSFiles()
	if !ok {
		t.Fatal("no TLS files")
	}
	for _, f := range []string{files.CA, files.ClientCert, files.ClientKey} {
		if _, err := os.Stat(f); err != nil {
			t.Error(err)
		}
	}
	port, err := tlsRedis(t, g, g.Node(0).Addr()).ConfigGet(ctx, "port").Result()
	if err != nil {
		t.Fatalf("CONFIG GET port over TLS: %v", err)
	}
	if port["port"] != "0" {
		t.Errorf("the server has a plaintext port too: %v", port)
	}
	if err := redisClient(t, g.Node(0).Addr()).Ping(ctx).Err(); err == nil {
		t.Error("a plaintext PING to the TLS port succeeded")
	}
	want := "rediss://" + g.Node(0).Addr() + "?tls_ca=" + url.QueryEscape(files.CA)
	if g.URL() != want {
		t.Errorf("URL = %q, want %q", g.URL(), want)
	}
	// A restarted node serves TLS again.
	if err := g.Node(0).Kill(ctx); err != nil {
		t.Fatal(err)
	}
	if err := g.Node(0).Start(ctx); err != nil {
		t.Fatal(err)
	}
	if err := tlsRedis(t, g, g.Node(0).Addr()).Ping(ctx).Err(); err != nil {
		t.Fatalf("PING over TLS after a restart: %v", err)
	}
	if err := g.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(files.CA); !os.IsNotExist(err) {
		t.Errorf("the TLS files outlive Close: %v", err)
	}
	if _, ok := (&sandbox.Group{}).TLSFiles(); ok {
		t.Error("a group without TLS reports TLS files")
	}
}

func TestRedisTLSReplica(t *testing.T) {
	g := start(t, sandbox.Spec{Kind: sandbox.Redis, Topology: sandbox.Replica, TLS: true})
	ctx := testCtx(t, time.Minute)
	primary := tlsRedis(t, g, g.Node(0).Addr())
	if err := primary.Set(ctx, "k", "v", 0).Err(); err != nil {
		t.Fatal(err)
	}
	if n, err := primary.Wait(ctx, 1, 2*time.Second).Result(); err != nil || n != 1 {
		t.Fatalf("WAIT 1 over TLS replication = %d, %v", n, err)
	}
}

func TestRedisClusterReplicas(t *testing.T) {
	g := start(t, sandbox.Spec{Kind: sandbox.Redis, Topology: sandbox.Cluster, Replicas: 1})
	ctx := testCtx(t, time.Minute)
	if len(g.Nodes()) != 6 || g.Primaries() != 3 {
		t.Fatalf("%d nodes, %d primaries; want 6 and 3", len(g.Nodes()), g.Primaries())
	}
	for i, addr := range g.Addrs() {
		info, err := redisClient(t, addr).Info(ctx, "replication").Result()
		if err != nil {
			t.Fatal(err)
		}
		want := "role:master"
		if i >= 3 {
			want = "master_link_status:up"
		}
		if !strings.Contains(info, want) {
			t.Errorf("node %d: no %q in\n%s", i, want, info)
		}
	}
	if got := g.URL(); strings.Count(got, ",") != 5 {
		t.Errorf("URL %q does not name all six nodes", got)
	}
}

func TestTLSAndReplicaSpecErrors(t *testing.T) {
	for _, tc := range []struct {
		spec sandbox.Spec
		want string
	}{
		{sandbox.Spec{Kind: sandbox.Etcd, TLS: true}, "TLS is only for redis"},
		{sandbox.Spec{Kind: sandbox.Redis, Replicas: 1}, "Replicas is for a redis cluster"},
		{sandbox.Spec{Kind: sandbox.Redis, Topology: sandbox.Cluster, Replicas: -1}, "negative"},
		{sandbox.Spec{Kind: sandbox.Redis, Topology: sandbox.Cluster, Replicas: 3}, "more than"},
	} {
		_, err := sandbox.Start(context.Background(), tc.spec)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("Start(%+v) = %v, want an error containing %q", tc.spec, err, tc.want)
		}
	}
}

// zkFourLetter sends a four-letter word, over TLS when tc is set, and
// returns the answer (or the error).
func zkFourLetter(addr, cmd string, tc *tls.Config) (string, error) {
	d := &net.Dialer{Timeout: 3 * time.Second}
	var conn net.Conn
	var err error
	if tc != nil {
		conn, err = tls.DialWithDialer(d, "tcp", addr, tc)
	} else {
		conn, err = d.Dial("tcp", addr)
	}
	if err != nil {
		return "", err
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(3 * time.Second))
	if _, err := conn.Write([]byte(cmd)); err != nil {
		return "", err
	}
	out, err := io.ReadAll(conn)
	return string(out), err
}

// TestZooKeeperTLS: a TLS ZooKeeper answers on its secure port only over
// TLS, its URL is zks:// with the CA, and it serves TLS again after a
// restart.
func TestZooKeeperTLS(t *testing.T) {
	g := start(t, sandbox.Spec{Kind: sandbox.ZooKeeper, TLS: true})
	ctx := testCtx(t, 2*time.Minute)
	files, ok := g.TLSFiles()
	if !ok {
		t.Fatal("no TLS files")
	}
	if out, err := zkFourLetter(g.Node(0).Addr(), "srvr", g.ClientTLS()); err != nil || !strings.Contains(out, "Mode: ") {
		t.Fatalf("srvr over TLS = %q, %v", out, err)
	}
	if out, _ := zkFourLetter(g.Node(0).Addr(), "srvr", nil); strings.Contains(out, "Mode") {
		t.Errorf("a plaintext srvr on the TLS port was answered: %q", out)
	}
	want := "zks://" + g.Node(0).Addr() + "?tls_ca=" + url.QueryEscape(files.CA)
	if g.URL() != want {
		t.Errorf("URL = %q, want %q", g.URL(), want)
	}
	if err := g.Node(0).Kill(ctx); err != nil {
		t.Fatal(err)
	}
	if err := g.Node(0).Start(ctx); err != nil {
		t.Fatal(err)
	}
	if out, err := zkFourLetter(g.Node(0).Addr(), "srvr", g.ClientTLS()); err != nil || !strings.Contains(out, "Mode: ") {
		t.Fatalf("srvr over TLS after a restart = %q, %v", out, err)
	}
}
