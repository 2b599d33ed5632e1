package sandbox

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/redis/go-redis/v9"
)

// Leader returns the index of the node that decides for key, waiting (up
// to ctx) until one is known: the leader of a ZooKeeper ensemble or an
// etcd cluster (key unused), the primary serving key's hash slot in a
// Redis Cluster, and node 0 of any other group. Fault tests kill it to
// force an election or a failover.
func (g *Group) Leader(ctx context.Context, key string) (int, error) {
	if g.isClosed() {
		return -1, errors.New("sandbox: group is closed")
	}
	var find func(context.Context) (int, error)
	switch {
	case g.spec.Kind == ZooKeeper && len(g.members) > 1:
		find = g.zkLeader
	case g.spec.Kind == Etcd && len(g.members) > 1:
		find = g.etcdLeader
	case g.spec.Kind == Redis && g.spec.Topology == Cluster:
		find = func(ctx context.Context) (int, error) { return g.slotPrimary(ctx, key) }
	default:
		return 0, nil
	}
	leader := -1
	err := waitUntil(ctx, func(ctx context.Context) (err error) {
		leader, err = find(ctx)
		return err
	})
	if err != nil {
		return -1, fmt.Errorf("sandbox: no leader of %s found: %w", g, err)
	}
	return leader, nil
}

// zkLeader asks every member for its mode ("srvr").
func (g *Group) zkLeader(ctx context.Context) (int, error) {
	for i, m := range g.members {
		out, err := zkFourLetter(ctx, m.Addr(), "srvr", g.spec.tls.clientConfig())
		if err == nil && strings.Contains(out, "Mode: leader") {
			return i, nil
		}
	}
	return -1, errors.New("no member reports Mode: leader")
}

// etcdLeader reads every member's etcd_server_is_leader metric.
func (g *Group) etcdLeader(ctx context.Context) (int, error) {
	for i, m := range g.members {
		if etcdGet(ctx, m.Addr(), "/metrics", "\netcd_server_is_leader 1") == nil {
			return i, nil
		}
	}
	return -1, errors.New("no member reports etcd_server_is_leader 1")
}

// slotPrimary asks a live node which primary serves key's slot, and finds
// that primary among the members by its node id.
func (g *Group) slotPrimary(ctx context.Context, key string) (int, error) {
	tc := g.spec.tls.clientConfig()
	var errs []error
	for _, m := range g.members {
		c := newRedisClient(m.Addr(), tc)
		id, err := slotPrimaryID(ctx, c, key)
		_ = c.Close()
		if err != nil {
			errs = append(errs, err)
			continue
		}
		for i, n := range g.members {
			c := newRedisClient(n.Addr(), tc)
			nid, err := c.Do(ctx, "CLUSTER", "MYID").Text()
			_ = c.Close()
			if err == nil && nid == id {
				return i, nil
			}
		}
		return -1, fmt.Errorf("the primary of %q (%s) is not a running member", key, id)
	}
	return -1, errors.Join(errs...)
}

// slotPrimaryID returns the node id of the primary serving key's slot, as
// c's node sees the cluster.
func slotPrimaryID(ctx context.Context, c *redis.Client, key string) (string, error) {
	slot, err := c.ClusterKeySlot(ctx, key).Result()
	if err != nil {
		return "", err
	}
	shards, err := c.ClusterShards(ctx).Result()
	if err != nil {
		return "", err
	}
	for _, sh := range shards {
		for _, r := range sh.Slots {
			if r.Start > slot || slot > r.End {
				continue
			}
			for _, n := range sh.Nodes {
				if n.Role == "master" && n.Health == "online" {
					return n.ID, nil
				}
			}
		}
	}
	return "", fmt.Errorf("slot %d of %q is not served", slot, key)
}
