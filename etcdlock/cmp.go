package etcdlock

import (
	"fmt"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/distlock/distlock"
	"github.com/distlock/distlock/backend"
)

// OwnerCmp returns a comparison that holds only while le's lock is still
// held in etcd: its key exists with the create revision it was granted
// (le.Token()). Put it in the If of your own transaction to make a write
// conditional on still owning the lock:
//
//	cmp, err := etcdlock.OwnerCmp(locker, lease)
//	...
//	resp, err := cli.Txn(ctx).If(cmp).Then(clientv3.OpPut("data", v)).Commit()
//	if err == nil && !resp.Succeeded { /* the lock was lost: nothing written */ }
//
// The comparison is checked by the server atomically with the writes, so
// it is stronger than checking le.Err() first. l must be the Locker that
// granted le, over an etcdlock Driver.
func OwnerCmp(l *distlock.Locker, le *distlock.Lease) (clientv3.Cmp, error) {
	d, ok := l.Driver().(*Driver)
	if !ok {
		return clientv3.Cmp{}, fmt.Errorf("etcdlock: owner comparison: %w: the Locker's driver is %T, not an etcdlock Driver", backend.ErrInvalidConfig, l.Driver())
	}
	return d.OwnerCmp(le.Key(), le.Token())
}

// OwnerCmp returns the comparison that holds while the lock on key granted
// with token is still held (see the package function OwnerCmp). It fails
// with ErrNotHeld if this driver holds no such lock.
func (d *Driver) OwnerCmp(key string, token uint64) (clientv3.Cmp, error) {
	d.mu.Lock()
	l := d.held[heldKey{key, token}]
	d.mu.Unlock()
	if l == nil {
		return clientv3.Cmp{}, fmt.Errorf("etcdlock: owner comparison for %q: %w: no lock with token %d", key, backend.ErrNotHeld, token)
	}
	return l.owns(), nil
}
