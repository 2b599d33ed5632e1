package zklock

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/go-zookeeper/zk"

	"github.com/distlock/distlock/backend"
)

// ForceRelease implements backend.Inspector: the holder's node (the first of
// the lock's queue) is deleted, version-checked. The waiters' nodes stay:
// the first is the next holder (its watch on the deleted node fires),
// with a czxid (its token) above the freed one's. The freed holder's
// session lives on; its next Refresh finds its node gone (ErrNotHeld).
// The record is then written to a persistent node of its own,
// <base>.forced/<key> (a sibling of the base node: the lock's parent is a
// container node, which the server removes once empty, and every
// acquisition rewrites its data), kept until the key's next force.
func (d *Driver) ForceRelease(ctx context.Context, key string, f backend.Forced) (backend.Info, error) {
	info := backend.Info{Key: key, Waiters: -1}
	parent := d.base + "/" + encodeKey(key)
	for {
		children, err := d.childrenOf(ctx, "force release", key, parent)
		if err != nil {
			return info, err
		}
		q := queueOf(children)
		if len(q) == 0 {
			return info, fmt.Errorf("zklock: force release %q: %w: the lock is free", key, backend.ErrNotHeld)
		}
		node := parent + "/" + q[0].name
		var zerr error
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
			zerr = d.conn.Delete(node, stat.Version)
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
		if err := d.record(ctx, key, rec); err != nil {
			return info, fmt.Errorf("zklock: force release %q: the lock is free, but its record was not written: %w", key, err)
		}
		return info, nil
	}
}

// forcedPath is the node of key's record of its last forced release.
func (d *Driver) forcedPath(key string) string { return d.base + ".forced/" + encodeKey(key) }

// record writes rec to key's record node, making it (and its parent)
// when missing.
func (d *Driver) record(ctx context.Context, key string, rec []byte) error {
	path := d.forcedPath(key)
	for attempt := 0; ; attempt++ {
		var zerr error
		if err := d.do(ctx, func() { _, zerr = d.conn.Set(path, rec, -1) }); err != nil {
			return err
		}
		if !errors.Is(zerr, zk.ErrNoNode) || attempt == 2 {
			return zerr
		}
		if err := d.do(ctx, func() {
			_, zerr = d.conn.Create(d.base+".forced", nil, zk.FlagPersistent, d.acl)
			if zerr == nil || errors.Is(zerr, zk.ErrNodeExists) {
				_, zerr = d.conn.Create(path, rec, zk.FlagPersistent, d.acl)
			}
		}); err != nil {
			return err
		}
		if zerr == nil {
			return nil
		}
		if !errors.Is(zerr, zk.ErrNodeExists) {
			return zerr
		}
	}
}

// forcedRecord reads key's record, or nil when there is none.
func (d *Driver) forcedRecord(ctx context.Context, key string) (*backend.Forced, error) {
	var data []byte
	var zerr error
	if err := d.do(ctx, func() { data, _, zerr = d.conn.Get(d.forcedPath(key)) }); err != nil {
		return nil, err
	}
	if errors.Is(zerr, zk.ErrNoNode) {
		return nil, nil
	}
	if zerr != nil {
		return nil, zerr
	}
	return forcedOf(data), nil
}

// forcedOf reads a record ForceRelease wrote, or nil.
func forcedOf(data []byte) *backend.Forced {
	var f backend.Forced
	if len(data) == 0 || json.Unmarshal(data, &f) != nil || f.By == "" {
		return nil
	}
	return &f
}
