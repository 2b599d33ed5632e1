package zklock

import (
	"context"
	"errors"

	"github.com/go-zookeeper/zk"

	"github.com/distlock/distlock/backend"
	"github.com/distlock/distlock/internal/ownerval"
)

// inspectMutex reports key's lock without taking it: whether it is held, the
// holder's owner id, value (its node's data, internal/ownerval) and
// fencing token (its czxid), and how
// many waiters are queued. TTL is the driver's session timeout while held
// (the holder's own session may differ; ZooKeeper does not tell).
func (d *Driver) inspectMutex(ctx context.Context, key string) (backend.Info, error) {
	info, err := d.inspectQueue(ctx, key)
	if err != nil {
		return info, err
	}
	// ForceRelease's record, if any: one more read.
	if info.Forced, err = d.forcedRecord(ctx, key); err != nil {
		return info, failure("inspect", key, err)
	}
	return info, nil
}

// inspectQueue is inspectMutex without the record of a forced release.
func (d *Driver) inspectQueue(ctx context.Context, key string) (backend.Info, error) {
	info := backend.Info{Key: key}
	parent := d.base + "/" + encodeKey(key)
	for attempt := 0; attempt < 3; attempt++ {
		children, err := d.childrenOf(ctx, "inspect", key, parent)
		if err != nil {
			return info, err
		}
		q := queueOf(children) // none where the parent is gone
		if len(q) == 0 {
			return info, nil
		}
		var zerr error
		var data []byte
		var stat *zk.Stat
		if err := d.do(ctx, func() { data, stat, zerr = d.conn.Get(parent + "/" + q[0].name) }); err != nil {
			return info, failure("inspect", key, err)
		}
		if errors.Is(zerr, zk.ErrNoNode) {
			continue // the holder left meanwhile: look again
		}
		if zerr != nil {
			return info, failure("inspect", key, zerr)
		}
		info.Owner, info.Value = ownerval.Split(data)
		info.Held, info.Token = true, uint64(stat.Czxid)
		info.Waiters, info.TTL = len(q)-1, d.timeout()
		return info, nil
	}
	return info, nil
}

var (
	_ backend.Inspector = (*Driver)(nil)
)

// List implements backend.Inspector: the base node's children name the locks
// (a lock's node stays after its last holder: Inspect tells which are
// held), filtered by prefix.
func (d *Driver) List(ctx context.Context, prefix string, limit int) ([]backend.Info, error) {
	var children []string
	var zerr error
	if err := d.do(ctx, func() { children, _, zerr = d.conn.Children(d.base) }); err != nil {
		return nil, failure("list", prefix, err)
	}
	if errors.Is(zerr, zk.ErrNoNode) {
		return nil, nil
	}
	if zerr != nil {
		return nil, failure("list", prefix, zerr)
	}
	keys := make([]string, 0, len(children))
	for _, c := range children {
		if k, ok := decodeKey(c); ok {
			keys = append(keys, k)
		}
	}
	return backend.ListHeld(ctx, d, keys, prefix, limit)
}
