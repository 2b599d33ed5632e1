package memlock

import (
	"context"
	"fmt"
	"time"

	"github.com/distlock/distlock/backend"
)

var _ backend.Batcher = (*Driver)(nil)

// TryAcquireMulti implements backend.Batcher: under the store's
// lock every key is checked, then every key is taken, so no other client
// sees a part of the set held.
func (d *Driver) TryAcquireMulti(ctx context.Context, reqs []backend.Request) ([]backend.Grant, error) {
	if len(reqs) == 0 {
		return nil, nil
	}
	if err := d.enter(ctx, "acquire"); err != nil {
		return nil, err
	}
	drop := d.claimDrop()
	now := time.Now()
	for _, req := range reqs {
		if e := d.s.lookup(req.Key, now, false); e != nil && e.holds > 0 && e.owner != req.Owner {
			left := e.expires.Sub(now)
			d.s.mu.Unlock()
			if drop {
				return nil, lostReply("acquire", backend.Grant{})
			}
			return nil, backend.NotAcquired(req.Key, left)
		}
	}
	grants := make([]backend.Grant, len(reqs))
	for i, req := range reqs {
		g, _ := d.s.take(d.s.lookup(req.Key, now, true), req.Owner, req.TTL, now)
		d.grantLocked(&g, req.Key, req.Owner, req.Hooks())
		grants[i] = g
	}
	d.s.mu.Unlock()
	if drop {
		for _, g := range grants[1:] {
			_ = g.Lock.Release(context.Background())
		}
		return nil, lostReply("acquire", grants[0]) // releases: not under d.s.mu
	}
	return grants, nil
}

// RefreshAll implements backend.Batcher, which memlock declares only for
// TryAcquireMulti (Capabilities.BatchRefresh is false: an in-process
// refresh has no round trip to save). Every lock answers ErrUnsupported.
func (d *Driver) RefreshAll(_ context.Context, locks []backend.Lock, _ []time.Duration) []error {
	errs := make([]error, len(locks))
	for i := range errs {
		errs[i] = fmt.Errorf("memlock: refresh all: %w: no batch refresh", backend.ErrUnsupported)
	}
	return errs
}
