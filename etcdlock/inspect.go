package etcdlock

import (
	"context"
	"fmt"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/distlock/distlock/backend"
	"github.com/distlock/distlock/internal/ownerval"
)

// inspectMutex reports key's lock without taking it: the holder is the key with
// the lowest create revision in the lock's range (its value is the owner,
// its create revision the token, its lease's remaining TTL the TTL), and
// every other key is a waiter. A value the holder set (announce.go)
// follows the owner in the key's value (internal/ownerval). A free lock reports token 0: etcd keeps no
// trace of past holders.
func (d *Driver) inspectMutex(ctx context.Context, key string) (backend.Info, error) {
	info := backend.Info{Key: key}
	// The lock's range and the record of its last forced release, read in
	// one round trip (a read-only transaction).
	tr, err := d.c.Txn(ctx).Then(
		clientv3.OpGet(lockRange(d.prefix, key), clientv3.WithPrefix(), clientv3.WithSort(clientv3.SortByCreateRevision, clientv3.SortAscend)),
		clientv3.OpGet(forcedName(d.prefix, key)),
	).Commit()
	if err != nil {
		return info, d.wrap(ctx, "inspect", key, err)
	}
	if len(tr.Responses) != 2 {
		return info, fmt.Errorf("etcdlock: inspect %q: %w: the transaction answered %d reads, want 2", key, backend.ErrUnavailable, len(tr.Responses))
	}
	resp := tr.Responses[0].GetResponseRange()
	if rec := tr.Responses[1].GetResponseRange(); len(rec.Kvs) > 0 {
		info.Forced = forcedOf(rec.Kvs[0].Value)
	}
	if len(resp.Kvs) == 0 {
		return info, nil
	}
	holder := resp.Kvs[0]
	info.Held = true
	info.Owner, info.Value = ownerval.Split(holder.Value)
	info.Token = uint64(holder.CreateRevision)
	info.Waiters = len(resp.Kvs) - 1
	if holder.Lease != 0 {
		ttl, err := d.c.TimeToLive(ctx, clientv3.LeaseID(holder.Lease))
		if err != nil {
			return info, d.wrap(ctx, "inspect", key, err)
		}
		info.TTL = time.Duration(max(ttl.TTL, 0)) * time.Second
	}
	return info, nil
}

// List implements backend.Inspector: the lock keys are read from the ranges
// under prefix (keys only), then each is inspected.
func (d *Driver) List(ctx context.Context, prefix string, limit int) ([]backend.Info, error) {
	resp, err := d.c.Get(ctx, d.prefix+"%"+escapeKey(prefix), clientv3.WithPrefix(), clientv3.WithKeysOnly())
	if err != nil {
		return nil, d.wrap(ctx, "list", prefix, err)
	}
	keys := make([]string, 0, len(resp.Kvs))
	for _, kv := range resp.Kvs {
		if k, ok := keyOf(d.prefix, string(kv.Key)); ok {
			keys = append(keys, k)
		}
	}
	return backend.ListHeld(ctx, d, keys, prefix, limit)
}
