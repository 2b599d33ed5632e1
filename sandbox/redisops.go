package sandbox

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/redis/go-redis/v9"
)

// redisSlots is the number of hash slots of a Redis Cluster.
const redisSlots = 16384

// newRedisClient returns a plain single-connection-pool client for addr,
// speaking RESP2 with no client identity, so it works on any Redis 7.
func newRedisClient(addr string) *redis.Client {
	return redis.NewClient(&redis.Options{
		Addr:            addr,
		Protocol:        2,
		DisableIdentity: true,
		MaxRetries:      -1,
		PoolSize:        2,
	})
}

// createRedisCluster turns freshly started cluster-enabled servers into one
// Redis Cluster: distinct config epochs, the slots split evenly, every node
// introduced to node 0 (CLUSTER MEET with the address nodes use to reach
// each other), then waits for cluster_state:ok everywhere.
func createRedisCluster(ctx context.Context, members []member) error {
	n := len(members)
	clients := make([]*redis.Client, n)
	for i, m := range members {
		clients[i] = newRedisClient(m.Addr())
		defer clients[i].Close()
	}
	for i, c := range clients {
		if err := c.Do(ctx, "CLUSTER", "SET-CONFIG-EPOCH", i+1).Err(); err != nil {
			return fmt.Errorf("sandbox: redis cluster: set config epoch on %s: %w", members[i].Name(), err)
		}
		lo, hi := i*redisSlots/n, (i+1)*redisSlots/n-1
		if err := c.Do(ctx, "CLUSTER", "ADDSLOTSRANGE", lo, hi).Err(); err != nil {
			return fmt.Errorf("sandbox: redis cluster: assign slots %d-%d to %s: %w", lo, hi, members[i].Name(), err)
		}
	}
	for i := 1; i < n; i++ {
		host, port, bus, err := members[i].peer(ctx)
		if err != nil {
			return fmt.Errorf("sandbox: redis cluster: address of %s: %w", members[i].Name(), err)
		}
		if err := clients[0].Do(ctx, "CLUSTER", "MEET", host, port, bus).Err(); err != nil {
			return fmt.Errorf("sandbox: redis cluster: meet %s at %s:%d@%d: %w", members[i].Name(), host, port, bus, err)
		}
	}
	addrs := make([]string, n)
	for i, m := range members {
		addrs[i] = m.Addr()
	}
	return waitRedisCluster(ctx, addrs)
}

// waitRedisCluster waits until every node reports cluster_state:ok and
// knows every other node.
func waitRedisCluster(ctx context.Context, addrs []string) error {
	for _, addr := range addrs {
		c := newRedisClient(addr)
		err := waitUntil(ctx, func(ctx context.Context) error {
			info, err := c.ClusterInfo(ctx).Result()
			if err != nil {
				return err
			}
			fields := infoFields(info)
			if fields["cluster_state"] != "ok" {
				return fmt.Errorf("cluster_state:%s", fields["cluster_state"])
			}
			if known := fields["cluster_known_nodes"]; known != strconv.Itoa(len(addrs)) {
				return fmt.Errorf("cluster_known_nodes:%s, want %d", known, len(addrs))
			}
			return nil
		})
		err = errors.Join(err, c.Close())
		if err != nil {
			return fmt.Errorf("sandbox: redis cluster at %s not ready: %w", addr, err)
		}
	}
	return nil
}

// waitRedisReplicas waits until every replica (addrs[1:]) has its link to
// the primary (addrs[0]) up and has finished the initial sync.
func waitRedisReplicas(ctx context.Context, addrs []string) error {
	for _, addr := range addrs[1:] {
		c := newRedisClient(addr)
		err := waitUntil(ctx, func(ctx context.Context) error {
			info, err := c.Info(ctx, "replication").Result()
			if err != nil {
				return err
			}
			fields := infoFields(info)
			if fields["role"] != "slave" || fields["master_link_status"] != "up" || fields["master_sync_in_progress"] != "0" {
				return fmt.Errorf("role:%s master_link_status:%s master_sync_in_progress:%s",
					fields["role"], fields["master_link_status"], fields["master_sync_in_progress"])
			}
			return nil
		})
		err = errors.Join(err, c.Close())
		if err != nil {
			return fmt.Errorf("sandbox: redis replica at %s not linked to its primary: %w", addr, err)
		}
	}
	return nil
}

// promoteRedis makes the replica at addr a primary.
func promoteRedis(ctx context.Context, addr string) error {
	c := newRedisClient(addr)
	err := c.Do(ctx, "REPLICAOF", "NO", "ONE").Err()
	if err != nil {
		err = fmt.Errorf("sandbox: promote redis at %s: %w", addr, err)
	}
	return errors.Join(err, c.Close())
}

// infoFields parses "key:value" lines of INFO or CLUSTER INFO.
func infoFields(info string) map[string]string {
	fields := make(map[string]string)
	for line := range strings.Lines(info) {
		if k, v, ok := strings.Cut(strings.TrimSpace(line), ":"); ok {
			fields[k] = v
		}
	}
	return fields
}
