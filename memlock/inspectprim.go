package memlock

import (
	"cmp"
	"context"
	"slices"
	"time"

	"github.com/distlock/distlock/backend"
)

// inspectPermits is Inspect for a semaphore: the unexpired grants, in
// token order. Waiters poll or are notified: their number is unknown (-1).
func (d *Driver) inspectPermits(ctx context.Context, key string) (backend.Info, error) {
	if err := d.enter(ctx, "inspect semaphore"); err != nil {
		return backend.Info{}, err
	}
	defer d.s.mu.Unlock()
	now := time.Now()
	info := backend.Info{Key: key, Waiters: -1}
	e := d.s.semLocked(key, now, false)
	if e == nil {
		return info, nil
	}
	for owner, p := range e.permits {
		info.Permits += p.n
		info.Holders = append(info.Holders, backend.Holder{Owner: owner, Permits: p.n, Token: p.token, TTL: p.expires.Sub(now)})
	}
	slices.SortFunc(info.Holders, func(a, b backend.Holder) int { return cmp.Compare(a.Token, b.Token) })
	info.Held = info.Permits > 0
	return info, nil
}

// inspectRW is Inspect for a read-write lock: the writer with its token,
// or the readers (owner order) with the last write's token, as their
// grants got it. Waiters are unknown (-1).
func (d *Driver) inspectRW(ctx context.Context, key string) (backend.Info, error) {
	if err := d.enter(ctx, "inspect rw lock"); err != nil {
		return backend.Info{}, err
	}
	defer d.s.mu.Unlock()
	info := backend.Info{Key: key, Waiters: -1}
	if d.s.rw[key] == nil {
		return info, nil
	}
	now := time.Now()
	e := d.s.rwLookup(key, now)
	if e.wholds > 0 {
		info.Owner, info.Token, info.TTL = e.writer, e.wtoken, e.wexp.Sub(now)
	}
	for owner, r := range e.readers {
		info.Holders = append(info.Holders, backend.Holder{Owner: owner, Token: e.lastWrite, TTL: r.exp.Sub(now)})
	}
	slices.SortFunc(info.Holders, func(a, b backend.Holder) int { return cmp.Compare(a.Owner, b.Owner) })
	info.Held = info.Owner != "" || len(info.Holders) > 0
	return info, nil
}
