package sandbox

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"strings"
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
		id, err := slotPrimaryID(ctx, m.Addr(), tc, key)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		for i, n := range g.members {
			nid, err := redisText(ctx, n.Addr(), tc, "CLUSTER", "MYID")
			if err == nil && nid == id {
				return i, nil
			}
		}
		return -1, fmt.Errorf("the primary of %q (%s) is not a running member", key, id)
	}
	return -1, errors.Join(errs...)
}

// slotPrimaryID returns the node id of the primary serving key's slot, as
// the node at addr sees the cluster (CLUSTER SHARDS: per shard, a flat
// list of its slot ranges and of its nodes, each a flat list of fields).
func slotPrimaryID(ctx context.Context, addr string, tc *tls.Config, key string) (string, error) {
	c, err := dialRedis(ctx, addr, tc)
	if err != nil {
		return "", err
	}
	defer c.Close()
	v, err := c.do("CLUSTER", "KEYSLOT", key)
	if err != nil {
		return "", err
	}
	slot, ok := v.(int64)
	if !ok {
		return "", fmt.Errorf("redis CLUSTER KEYSLOT: reply %T, want an integer", v)
	}
	v, err = c.do("CLUSTER", "SHARDS")
	if err != nil {
		return "", err
	}
	shards, _ := v.([]any)
	for _, sh := range shards {
		fields := respFields(sh)
		ranges, _ := fields["slots"].([]any)
		served := false
		for i := 0; i+1 < len(ranges); i += 2 {
			lo, _ := ranges[i].(int64)
			hi, _ := ranges[i+1].(int64)
			served = served || lo <= slot && slot <= hi
		}
		if !served {
			continue
		}
		nodes, _ := fields["nodes"].([]any)
		for _, n := range nodes {
			nf := respFields(n)
			if nf["role"] == "master" && nf["health"] == "online" {
				if id, ok := nf["id"].(string); ok {
					return id, nil
				}
			}
		}
	}
	return "", fmt.Errorf("slot %d of %q is not served", slot, key)
}

// respFields reads a RESP2 flat list of name/value pairs into a map.
func respFields(v any) map[string]any {
	list, _ := v.([]any)
	m := make(map[string]any, len(list)/2)
	for i := 0; i+1 < len(list); i += 2 {
		if k, ok := list[i].(string); ok {
			m[k] = list[i+1]
		}
	}
	return m
}
