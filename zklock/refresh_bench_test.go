package zklock

import (
	"context"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"
)

// BenchmarkRefreshSync measures what the Sync before a renewal's Exists
// costs: the bare Exists (the renewal before) and Sync+Exists (now), on a
// standalone server and through a follower of a 3-node ensemble.
//
//	DISTLOCK_SANDBOX=local go test -run '^$' -bench RefreshSync -benchtime 500x -count 3 ./zklock/
func BenchmarkRefreshSync(b *testing.B) {
	for _, nodes := range []int{1, 3} {
		c := startCluster(b, nodes)
		if err := c.g.Wait(context.Background()); err != nil {
			b.Fatal(err)
		}
		target := 0
		name := "standalone"
		if nodes > 1 {
			name = "follower"
			target = (leaderIndex(b, c) + 1) % nodes
		}
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		conn, _, err := connect(ctx, c.g.Addrs()[target:target+1], dialConfig{timeout: 10 * time.Second, connectTimeout: 50 * time.Second})
		cancel()
		if err != nil {
			b.Fatal(err)
		}
		path, err := conn.Create("/bench-refresh", nil, zk.FlagEphemeral, zk.WorldACL(zk.PermAll))
		if err != nil {
			conn.Close()
			b.Fatal(err)
		}
		b.Run(name+"/exists", func(b *testing.B) {
			for b.Loop() {
				if _, _, err := conn.Exists(path); err != nil {
					b.Fatal(err)
				}
			}
		})
		b.Run(name+"/sync+exists", func(b *testing.B) {
			for b.Loop() {
				if _, err := conn.Sync(path); err != nil {
					b.Fatal(err)
				}
				if _, _, err := conn.Exists(path); err != nil {
					b.Fatal(err)
				}
			}
		})
		conn.Close()
	}
}
