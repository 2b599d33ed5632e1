package sandbox

import (
	"context"
	"crypto/tls"
	"fmt"
	"strconv"
	"strings"
)

// redisSlots is the number of hash slots of a Redis Cluster.
const redisSlots = 16384

// createRedisCluster turns freshly started cluster-enabled servers into one
// Redis Cluster: distinct config epochs, the slots split evenly over the
// first primaries nodes, every node introduced to node 0 (CLUSTER MEET with
// the address nodes use to reach each other), each further node made a
// replica of primary i%primaries, then waits for cluster_state:ok
// everywhere and for the replicas' links.
func createRedisCluster(ctx context.Context, members []member, primaries int, tc *tls.Config) error {
	n := len(members)
	for i, m := range members {
		if _, err := redisDo(ctx, m.Addr(), tc, "CLUSTER", "SET-CONFIG-EPOCH", i+1); err != nil {
			return fmt.Errorf("sandbox: redis cluster: set config epoch on %s: %w", members[i].Name(), err)
		}
		if i >= primaries {
			continue
		}
		lo, hi := i*redisSlots/primaries, (i+1)*redisSlots/primaries-1
		if _, err := redisDo(ctx, m.Addr(), tc, "CLUSTER", "ADDSLOTSRANGE", lo, hi); err != nil {
			return fmt.Errorf("sandbox: redis cluster: assign slots %d-%d to %s: %w", lo, hi, members[i].Name(), err)
		}
	}
	for i := 1; i < n; i++ {
		host, port, bus, err := members[i].peer(ctx)
		if err != nil {
			return fmt.Errorf("sandbox: redis cluster: address of %s: %w", members[i].Name(), err)
		}
		if _, err := redisDo(ctx, members[0].Addr(), tc, "CLUSTER", "MEET", host, port, bus); err != nil {
			return fmt.Errorf("sandbox: redis cluster: meet %s at %s:%d@%d: %w", members[i].Name(), host, port, bus, err)
		}
	}
	ids := make([]string, n)
	peers := make([]string, n)
	for i, m := range members {
		id, err := redisText(ctx, m.Addr(), tc, "CLUSTER", "MYID")
		if err != nil {
			return fmt.Errorf("sandbox: redis cluster: node id of %s: %w", members[i].Name(), err)
		}
		host, port, bus, err := members[i].peer(ctx)
		if err != nil {
			return fmt.Errorf("sandbox: redis cluster: address of %s: %w", members[i].Name(), err)
		}
		ids[i], peers[i] = id, fmt.Sprintf("%s:%d@%d", host, port, bus)
	}
	if err := checkRedisPeers(ctx, members[0].Addr(), tc, ids, peers); err != nil {
		return fmt.Errorf("sandbox: redis cluster: %w", err)
	}
	for i := primaries; i < n; i++ {
		p := i % primaries
		if err := replicateRedis(ctx, members[i].Addr(), tc, ids[p], peers[p]); err != nil {
			return fmt.Errorf("sandbox: redis cluster: make %s a replica of %s: %w", members[i].Name(), members[p].Name(), err)
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
		err := waitUntil(ctx, func(ctx context.Context) error {
			nodes, err := redisText(ctx, addr, tc, "CLUSTER", "NODES")
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
		if err != nil {
			return fmt.Errorf("sandbox: redis cluster at %s: %w", addr, err)
		}
	}
	return nil
}

// checkRedisPeers waits until node 0 (c) has finished its handshake with
// every node it was introduced to, and checks that the node it reached at
// each address (peers[i], host:port@bus) is the one the sandbox started
// there (ids[i], its CLUSTER MYID): a server of another group answering on
// a port of this one would otherwise show only as gossip that never
// converges.
//
// A peer node 0 does not know is met again: CLUSTER MEET only starts a
// handshake, and a node drops a handshake that has not completed within
// the node timeout (1 s in a cluster with replicas) and never tries
// again, so on a busy machine one MEET can leave a node out of the
// cluster for good (a MEET while the handshake is still in progress does
// nothing).
func checkRedisPeers(ctx context.Context, addr string, tc *tls.Config, ids, peers []string) error {
	return waitUntil(ctx, func(ctx context.Context) error {
		nodes, err := redisText(ctx, addr, tc, "CLUSTER", "NODES")
		if err != nil {
			return err
		}
		known := map[string]string{} // host:port@bus -> id
		for line := range strings.Lines(nodes) {
			f := strings.Fields(line)
			if len(f) < 3 || strings.Contains(f[2], "handshake") {
				continue
			}
			addr, _, _ := strings.Cut(f[1], ",") // host:port@bus[,hostname]
			known[addr] = f[0]
		}
		for i := 1; i < len(ids); i++ {
			id, ok := known[peers[i]]
			switch {
			case !ok:
				host, ports, _ := strings.Cut(peers[i], ":")
				port, bus, _ := strings.Cut(ports, "@")
				if _, err := redisDo(ctx, addr, tc, "CLUSTER", "MEET", host, port, bus); err != nil {
					return fmt.Errorf("meet %s again: %w", peers[i], err)
				}
				return fmt.Errorf("node 0 has not finished its handshake with %s yet; it knows:\n%s", peers[i], nodes)
			case id != ids[i]:
				return fmt.Errorf("node 0 reached node id %s at %s, but the server the sandbox started there is %s (another group's server on this port?); node 0 knows:\n%s",
					id, peers[i], ids[i], nodes)
			}
		}
		return nil
	})
}

// replicateRedis makes the cluster node of replica follow the primary
// whose node id is id, at peer (host:port@bus). The replica is introduced
// to the primary directly (CLUSTER MEET, again on each try: harmless if
// they know each other already, and a dropped handshake is started
// again; see checkRedisPeers) rather than left to learn of it by node 0's
// gossip alone, and
// REPLICATE is sent once the replica knows the primary's id. A replica
// that never does reports what it knows.
func replicateRedis(ctx context.Context, replica string, tc *tls.Config, id, peer string) error {
	host, ports, _ := strings.Cut(peer, ":")
	port, bus, _ := strings.Cut(ports, "@")
	var nodes string
	err := waitUntil(ctx, func(ctx context.Context) error {
		if _, err := redisDo(ctx, replica, tc, "CLUSTER", "MEET", host, port, bus); err != nil {
			return fmt.Errorf("meet the primary at %s: %w", peer, err)
		}
		var err error
		if nodes, err = redisText(ctx, replica, tc, "CLUSTER", "NODES"); err != nil {
			return err
		}
		if !strings.Contains(nodes, id) {
			return fmt.Errorf("node %s not known yet", id)
		}
		_, err = redisDo(ctx, replica, tc, "CLUSTER", "REPLICATE", id)
		return err
	})
	if err != nil && nodes != "" {
		return fmt.Errorf("%w; the replica knows:\n%s", err, nodes)
	}
	return err
}

// waitRedisCluster waits until every node reports cluster_state:ok and
// knows every other node.
func waitRedisCluster(ctx context.Context, addrs []string, tc *tls.Config) error {
	for _, addr := range addrs {
		err := waitUntil(ctx, func(ctx context.Context) error {
			info, err := redisText(ctx, addr, tc, "CLUSTER", "INFO")
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
		err := waitUntil(ctx, func(ctx context.Context) error {
			info, err := redisText(ctx, addr, tc, "INFO", "replication")
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
		if err != nil {
			return fmt.Errorf("sandbox: redis replica at %s not linked to its primary: %w", addr, err)
		}
	}
	return nil
}

// promoteRedis makes the replica at addr a primary.
func promoteRedis(ctx context.Context, addr string, tc *tls.Config) error {
	if _, err := redisDo(ctx, addr, tc, "REPLICAOF", "NO", "ONE"); err != nil {
		return fmt.Errorf("sandbox: promote redis at %s: %w", addr, err)
	}
	return nil
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
