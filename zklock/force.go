package zklock

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/go-zookeeper/zk"

	"github.com/distlock/distlock/backend"
)

var _ backend.Freer = (*Driver)(nil)

// ForceRelease implements backend.Freer: the holder's node (the first of
// the lock's queue) is deleted and the record written into the lock's
// parent node's data, in one multi. The waiters' nodes stay: the first
// is the next holder (its watch on the deleted node fires), with a czxid
// (its token) above the freed one's. The freed holder's session lives
// on; its next Refresh finds its node gone (ErrNotHeld).
func (d *Driver) ForceRelease(ctx context.Context, key string, f backend.Forced) (backend.Info, error) {
	info := backend.Info{Key: key, Waiters: -1}
	parent := d.base + "/" + encodeKey(key)
	for {
		var children []string
		var zerr error
		if err := d.do(ctx, func() { children, _, zerr = d.conn.Children(parent) }); err != nil {
			return info, failure("force release", key, err)
		}
		if zerr != nil && !errors.Is(zerr, zk.ErrNoNode) {
			return info, failure("force release", key, zerr)
		}
		q := queueOf(children)
		if len(q) == 0 {
			return info, fmt.Errorf("zklock: force release %q: %w: the lock is free", key, backend.ErrNotHeld)
		}
		node := parent + "/" + q[0].name
		var data []byte
		var stat *zk.Stat
		if err := d.do(ctx, func() { data, stat, zerr = d.conn.Get(node) }); err != nil {
			return info, failure("force release", key, err)
		}
		if errors.Is(zerr, zk.ErrNoNode) {
			continue // the holder left meanwhile: look again
		}
		if zerr != nil {
			return info, failure("force release", key, zerr)
		}
		f.Owner, f.Token = string(data), uint64(stat.Czxid)
		rec, err := json.Marshal(f)
		if err != nil {
			return info, fmt.Errorf("zklock: force release %q: %w", key, err)
		}
		if err := d.do(ctx, func() {
			var res []zk.MultiResponse
			res, zerr = d.conn.Multi(&zk.DeleteRequest{Path: node, Version: stat.Version}, &zk.SetDataRequest{Path: parent, Data: rec, Version: -1})
			for _, r := range res {
				if r.Error != nil {
					zerr = r.Error // the op that failed, rather than the multi's
					break
				}
			}
		}); err != nil {
			return info, failure("force release", key, err)
		}
		if errors.Is(zerr, zk.ErrNoNode) || errors.Is(zerr, zk.ErrBadVersion) {
			continue
		}
		if zerr != nil {
			return info, failure("force release", key, zerr)
		}
		info.Held, info.Owner, info.Token = true, f.Owner, f.Token
		return info, nil
	}
}

// forcedOf reads the record ForceRelease wrote into a lock's parent node
// (data), or nil.
func forcedOf(data []byte) *backend.Forced {
	var f backend.Forced
	if len(data) == 0 || json.Unmarshal(data, &f) != nil || f.By == "" {
		return nil
	}
	return &f
}
