package etcdlock

import (
	"cmp"
	"context"
	"slices"
	"strings"
	"time"

	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/distlock/distlock/backend"
)

// inspectPermits is Inspect for a semaphore with one read of
// the semaphore's queue (semaphore.go): the keys that hold are its grants
// (owner and permits from the value, token its create revision, TTL its
// lease's), the others its waiters.
func (d *Driver) inspectPermits(ctx context.Context, key string) (backend.Info, error) {
	info := backend.Info{Key: key}
	resp, err := d.c.Get(ctx, semRange(d.prefix, key), clientv3.WithPrefix(),
		clientv3.WithSort(clientv3.SortByCreateRevision, clientv3.SortAscend))
	if err != nil {
		return info, d.wrap(ctx, "inspect semaphore", key, err)
	}
	var ahead []semEntry
	var leases []int64
	for i, kv := range resp.Kvs {
		p, l := permitsOf(kv.Value)
		e := semEntry{name: string(kv.Key), permits: p, limit: l}
		if !fits(ahead, e) {
			info.Waiters = len(resp.Kvs) - i // it waits, and every key after it
			break
		}
		ahead = append(ahead, e)
		info.Permits += p
		info.Holders = append(info.Holders, backend.Holder{Owner: semOwner(kv.Value), Permits: p, Token: uint64(kv.CreateRevision)})
		leases = append(leases, kv.Lease)
	}
	if err := d.holderTTLs(ctx, key, info.Holders, leases); err != nil {
		return info, err
	}
	info.Held = info.Permits > 0
	return info, nil
}

// semOwner is the owner in a semaphore key's value "<permits> <limit> <owner>".
func semOwner(v []byte) string {
	parts := strings.SplitN(string(v), " ", 3)
	if len(parts) < 3 {
		return ""
	}
	return parts[2]
}

// inspectRW is Inspect for a read-write lock with one transaction reading
// the lock's range and its fence key (rwlock.go): the oldest key holds if
// it is a writer's, else the readers older than the oldest writer hold;
// every other key waits. Readers' token is the fence key's revision, as
// their grants read it; the writer's too once it has put the fence (0
// while it is about to).
func (d *Driver) inspectRW(ctx context.Context, key string) (backend.Info, error) {
	info := backend.Info{Key: key}
	rng := rwRange(d.prefix, key)
	resp, err := d.c.Txn(ctx).Then(
		clientv3.OpGet(rng, clientv3.WithPrefix(), clientv3.WithSort(clientv3.SortByCreateRevision, clientv3.SortAscend)),
		clientv3.OpGet(rwFence(d.prefix, key))).Commit()
	if err != nil {
		return info, d.wrap(ctx, "inspect rw lock", key, err)
	}
	kvs := resp.Responses[0].GetResponseRange().Kvs
	fence := int64(modRev(resp.Responses[1].GetResponseRange().Kvs))
	var holders []backend.Holder
	var leases []int64
	hold := func(kv *mvccpb.KeyValue, token int64) {
		holders = append(holders, backend.Holder{Owner: string(kv.Value), Token: uint64(max(token, 0))})
		leases = append(leases, kv.Lease)
	}
	switch {
	case len(kvs) > 0 && strings.HasPrefix(string(kvs[0].Key), rng+"w"):
		if fence < kvs[0].CreateRevision {
			fence = 0 // its fence put is still to come
		}
		hold(kvs[0], fence)
	default:
		for _, kv := range kvs {
			if strings.HasPrefix(string(kv.Key), rng+"w") {
				break
			}
			hold(kv, fence)
		}
	}
	info.Waiters = len(kvs) - len(holders)
	if err := d.holderTTLs(ctx, key, holders, leases); err != nil {
		return info, err
	}
	if len(kvs) > 0 && strings.HasPrefix(string(kvs[0].Key), rng+"w") {
		info.Owner, info.Token, info.TTL = holders[0].Owner, holders[0].Token, holders[0].TTL
	} else {
		info.Holders = holders
		slices.SortFunc(info.Holders, func(a, b backend.Holder) int { return cmp.Compare(a.Owner, b.Owner) })
	}
	info.Held = len(holders) > 0
	return info, nil
}

// holderTTLs fills in each holder's remaining TTL from its key's lease
// (leases[i] is holders[i]'s), asking once per lease.
func (d *Driver) holderTTLs(ctx context.Context, key string, holders []backend.Holder, leases []int64) error {
	ttls := map[int64]time.Duration{}
	for i, id := range leases {
		if id == 0 {
			continue
		}
		ttl, ok := ttls[id]
		if !ok {
			resp, err := d.c.TimeToLive(ctx, clientv3.LeaseID(id))
			if err != nil {
				return d.wrap(ctx, "inspect", key, err)
			}
			ttl = time.Duration(max(resp.TTL, 0)) * time.Second
			ttls[id] = ttl
		}
		holders[i].TTL = ttl
	}
	return nil
}
