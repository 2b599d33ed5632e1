package etcdlock

import (
	"fmt"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/distlock/distlock/backend"
)

// OwnerCmp returns a comparison that holds only while the lock on key
// granted with token is still held in etcd: its key exists with the create
// revision it was granted (the token). Put it in the If of your own
// transaction to make a write conditional on still owning the lock:
//
//	d := locker.Driver().(*etcdlock.Driver)
//	cmp, err := d.OwnerCmp(lease.Key(), lease.Token())
//	...
//	resp, err := d.Client().Txn(ctx).If(cmp).Then(clientv3.OpPut("data", v)).Commit()
//	if err == nil && !resp.Succeeded { /* the lock was lost: nothing written */ }
//
// The comparison is checked by the server atomically with the writes, so
// it is stronger than checking the lease's Err() first. It fails with
// ErrNotHeld if this driver holds no such lock (released, or never
// granted by it).
func (d *Driver) OwnerCmp(key string, token uint64) (clientv3.Cmp, error) {
	d.mu.Lock()
	l := d.held[heldKey{key, token}]
	d.mu.Unlock()
	if l == nil {
		return clientv3.Cmp{}, fmt.Errorf("etcdlock: owner comparison for %q: %w: no lock with token %d", key, backend.ErrNotHeld, token)
	}
	return l.owns(), nil
}
