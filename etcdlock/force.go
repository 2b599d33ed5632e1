package etcdlock

import (
	"context"
	"encoding/json"
	"fmt"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/distlock/distlock/backend"
)

// forcedName returns the record of key's last forced release under
// prefix: <prefix>forced/<escaped key>. Like a tombstone it lies in no
// lock's range (keyOf never takes it for a lock's key).
func forcedName(prefix, key string) string { return prefix + "forced/" + escapeKey(key) }

// ForceRelease implements backend.Inspector: the holder's key (the lowest
// create revision in the lock's range) is deleted in a transaction that
// requires it to be that same key still, so a holder that released in
// between and a new holder are never hit; the waiters' keys stay, and the
// first of them is the next holder, with a create revision (its token)
// above the freed one's. The record is put in the same transaction,
// bound to a lease of backend.ForcedKeep.
func (d *Driver) ForceRelease(ctx context.Context, key string, f backend.Forced) (backend.Info, error) {
	info := backend.Info{Key: key, Waiters: -1}
	for {
		resp, err := d.c.Get(ctx, lockRange(d.prefix, key), clientv3.WithPrefix(),
			clientv3.WithSort(clientv3.SortByCreateRevision, clientv3.SortAscend), clientv3.WithLimit(1))
		if err != nil {
			return info, d.wrap(ctx, "force release", key, err)
		}
		if len(resp.Kvs) == 0 {
			return info, fmt.Errorf("etcdlock: force release %q: %w: the lock is free", key, backend.ErrNotHeld)
		}
		h := resp.Kvs[0]
		f.Owner, f.Token = string(h.Value), uint64(h.CreateRevision)
		rec, err := json.Marshal(f)
		if err != nil {
			return info, fmt.Errorf("etcdlock: force release %q: %w", key, err)
		}
		lease, err := d.c.Grant(ctx, int64(backend.ForcedKeep.Seconds()))
		if err != nil {
			return info, d.wrap(ctx, "force release", key, err)
		}
		tr, err := d.c.Txn(ctx).
			If(clientv3.Compare(clientv3.CreateRevision(string(h.Key)), "=", h.CreateRevision)).
			Then(clientv3.OpDelete(string(h.Key)), clientv3.OpPut(forcedName(d.prefix, key), string(rec), clientv3.WithLease(lease.ID))).
			Commit()
		if err != nil {
			return info, d.wrap(ctx, "force release", key, err)
		}
		if tr.Succeeded {
			info.Held, info.Owner, info.Token = true, f.Owner, f.Token
			return info, nil
		}
		_, _ = d.c.Revoke(ctx, lease.ID) // the holder changed: look again
	}
}

// forcedOf reads a record ForceRelease wrote, or nil.
func forcedOf(v []byte) *backend.Forced {
	var f backend.Forced
	if json.Unmarshal(v, &f) != nil || f.By == "" {
		return nil // not ours: no record
	}
	return &f
}
