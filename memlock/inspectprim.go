package memlock

import (
	"cmp"
	"context"
	"slices"
	"time"

	"github.com/distlock/distlock/backend"
)

var (
	_ backend.SemaphoreInspector = (*Driver)(nil)
	_ backend.RWInspector        = (*Driver)(nil)
)

// InspectSemaphore implements backend.SemaphoreInspector: the unexpired
// grants, in token order. Waiters poll or are notified: their number is
// unknown (-1).
func (d *Driver) InspectSemaphore(ctx context.Context, key string) (backend.SemaphoreInfo, error) {
	if err := d.enter(ctx, "inspect semaphore"); err != nil {
		return backend.SemaphoreInfo{}, err
	}
	defer d.s.mu.Unlock()
	now := time.Now()
	info := backend.SemaphoreInfo{Key: key, Waiters: -1}
	e := d.s.semLocked(key, now, false)
	if e == nil {
		return info, nil
	}
	for owner, p := range e.permits {
		info.Held += p.n
		info.Holders = append(info.Holders, backend.Holder{Owner: owner, Permits: p.n, Token: p.token, TTL: p.expires.Sub(now)})
	}
	slices.SortFunc(info.Holders, func(a, b backend.Holder) int { return cmp.Compare(a.Token, b.Token) })
	return info, nil
}

// InspectRW implements backend.RWInspector: the writer with its token, or
// the readers (owner order) with the last write's token, as their grants
// got it. Waiters are unknown (-1).
func (d *Driver) InspectRW(ctx context.Context, key string) (backend.RWInfo, error) {
	if err := d.enter(ctx, "inspect rw lock"); err != nil {
		return backend.RWInfo{}, err
	}
	defer d.s.mu.Unlock()
	info := backend.RWInfo{Key: key, Waiters: -1}
	if d.s.rw[key] == nil {
		return info, nil
	}
	now := time.Now()
	e := d.s.rwLookup(key, now)
	if e.wholds > 0 {
		info.Writer = &backend.Holder{Owner: e.writer, Token: e.wtoken, TTL: e.wexp.Sub(now)}
	}
	for owner, r := range e.readers {
		info.Readers = append(info.Readers, backend.Holder{Owner: owner, Token: e.lastWrite, TTL: r.exp.Sub(now)})
	}
	slices.SortFunc(info.Readers, func(a, b backend.Holder) int { return cmp.Compare(a.Owner, b.Owner) })
	return info, nil
}
