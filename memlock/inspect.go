package memlock

import (
	"context"
	"slices"
	"strings"
	"time"

	"github.com/distlock/distlock/backend"
)

var (
	_ backend.Inspector = (*Driver)(nil)
)

// inspectMutex is Inspect for the mutex.
func (d *Driver) inspectMutex(ctx context.Context, key string) (backend.Info, error) {
	if err := d.enter(ctx, "inspect"); err != nil {
		return backend.Info{}, err
	}
	defer d.s.mu.Unlock()
	now := time.Now()
	if e := d.s.lookup(key, now, false); e != nil {
		return d.infoLocked(e, now), nil
	}
	return backend.Info{Key: key, Waiters: -1, Forced: d.s.forcedLocked(key)}, nil
}

// List implements backend.Inspector.
func (d *Driver) List(ctx context.Context, prefix string, limit int) ([]backend.Info, error) {
	if err := d.enter(ctx, "list"); err != nil {
		return nil, err
	}
	defer d.s.mu.Unlock()
	now := time.Now()
	var out []backend.Info
	for key, e := range d.s.locks {
		if strings.HasPrefix(key, prefix) && e.held(now) {
			out = append(out, d.infoLocked(e, now))
		}
	}
	slices.SortFunc(out, func(a, b backend.Info) int { return strings.Compare(a.Key, b.Key) })
	if limit > 0 && len(out) > limit {
		out = out[:limit]
	}
	return out, nil
}

// infoLocked reports e's state at now; the store's mutex is held.
func (d *Driver) infoLocked(e *entry, now time.Time) backend.Info {
	info := backend.Info{Key: e.key, Token: e.token, Waiters: -1, Forced: d.s.forcedLocked(e.key)}
	if d.wait == backend.WaitQueue {
		info.Waiters = len(e.waiters)
	}
	if e.held(now) {
		info.Held, info.Owner, info.TTL, info.Value = true, e.owner, e.expires.Sub(now), e.value
	}
	return info
}
