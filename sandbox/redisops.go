package sandbox

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/redis/go-redis/v9"
)

// redisSlots is the number of hash slots of a Redis Cluster.
const redisSlots = 16384

// newRedisClient returns a plain single-connection-pool client for addr,
// speaking RESP2 with no client identity, so it works on any Redis 7; tc is
// the client TLS configuration of a TLS group, else nil.
func newRedisClient(addr string, tc *tls.Config) *redis.Client {
	if tc != nil {
		tc = serverName(tc, addr)
	}
	return redis.NewClient(&redis.Options{
		Addr:            addr,
		TLSConfig:       tc,
		Protocol:        2,
		DisableIdentity: true,
		MaxRetries:      -1,
		PoolSize:        2,
	})
}

// createRedisCluster turns freshly started cluster-enabled servers into one
// Redis Cluster: distinct config epochs, the slots split evenly over the
// first primaries nodes, every node introduced to node 0 (CLUSTER MEET with
// the address nodes use to reach each other), each further node made a
// replica of primary i%primaries, then waits for cluster_state:ok
// everywhere and for the replicas' links.
func createRedisCluster(ctx context.Context, members []member, primaries int, tc *tls.Config) error {
	n := len(members)
	clients := make([]*redis.Client, n)
	for i, m := range members {
		clients[i] = newRedisClient(m.Addr(), tc)
		defer clients[i].Close()
	}
	for i, c := range clients {
		if err := c.Do(ctx, "CLUSTER", "SET-CONFIG-EPOCH", i+1).Err(); err != nil {
			return fmt.Errorf("sandbox: redis cluster: set config epoch on %s: %w", members[i].Name(), err)
		}
		if i >= primaries {
			continue
		}
		lo, hi := i*redisSlots/primaries, (i+1)*redisSlots/primaries-1
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
	for i := primaries; i < n; i++ {
		if err := replicateRedis(ctx, clients[i], clients[i%primaries]); err != nil {
			return fmt.Errorf("sandbox: redis cluster: make %s a replica of %s: %w", members[i].Name(), members[i%primaries].Name(), err)
		}
	}
	addrs := make([]string, n)
	for i, m := range members {
		addrs[i] = m.Addr()
	}
	if err := waitRedisCluster(ctx, addrs, tc); err != nil {
		return err
	}
	if err := waitRedisReplicas(ctx, addrs[primaries:], tc); err != nil {
		return err
	}
	return waitClusterView(ctx, addrs, n-primaries, tc)
}

// waitClusterView waits until every node knows, by gossip, that replicas
// of the nodes are replicas (CLUSTER NODES flags them "slave"), so that
// CLUSTER SLOTS lists every shard's replica wherever a client asks.
func waitClusterView(ctx context.Context, addrs []string, replicas int, tc *tls.Config) error {
	for _, addr := range addrs {
		c := newRedisClient(addr, tc)
		err := waitUntil(ctx, func(ctx context.Context) error {
			nodes, err := c.ClusterNodes(ctx).Result()
			if err != nil {
				return err
			}
			seen := 0
			for line := range strings.Lines(nodes) {
				if f := strings.Fields(line); len(f) > 2 && strings.Contains(f[2], "slave") {
					seen++
				}
			}
			if seen != replicas {
				return fmt.Errorf("%d of %d replicas known as replicas", seen, replicas)
			}
			return nil
		})
		err = errors.Join(err, c.Close())
		if err != nil {
			return fmt.Errorf("sandbox: redis cluster at %s: %w", addr, err)
		}
	}
	return nil
}

// replicateRedis makes the cluster node of replica follow the one of
// primary, once the replica has learnt the primary's node id by gossip.
func replicateRedis(ctx context.Context, replica, primary *redis.Client) error {
	id, err := primary.Do(ctx, "CLUSTER", "MYID").Text()
	if err != nil {
		return err
	}
	return waitUntil(ctx, func(ctx context.Context) error {
		nodes, err := replica.ClusterNodes(ctx).Result()
		if err != nil {
			return err
		}
		if !strings.Contains(nodes, id) {
			return fmt.Errorf("node %s not known yet", id)
		}
		return replica.Do(ctx, "CLUSTER", "REPLICATE", id).Err()
	})
}

// waitRedisCluster waits until every node reports cluster_state:ok and
// knows every other node.
func waitRedisCluster(ctx context.Context, addrs []string, tc *tls.Config) error {
	for _, addr := range addrs {
		c := newRedisClient(addr, tc)
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

// waitRedisReplicas waits until every replica in addrs has its link to
// its primary up and has finished the initial sync.
func waitRedisReplicas(ctx context.Context, addrs []string, tc *tls.Config) error {
	for _, addr := range addrs {
		c := newRedisClient(addr, tc)
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
func promoteRedis(ctx context.Context, addr string, tc *tls.Config) error {
	c := newRedisClient(addr, tc)
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
