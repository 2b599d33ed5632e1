package zklock

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/distlock/distlock/backend"
)

var _ backend.Batcher = (*Driver)(nil)

// TryAcquireMulti implements backend.Batcher, which zklock declares only
// for RefreshAll (Capabilities.MultiAtomic is false: a multi cannot
// require a lock's queue to be empty).
func (d *Driver) TryAcquireMulti(context.Context, []backend.Request) ([]backend.Grant, error) {
	return nil, fmt.Errorf("zklock: acquire several keys: %w: no multi-lock step", backend.ErrUnsupported)
}

// refreshPipeline bounds the Exists requests a renewal round has in flight
// on the session's connection at once.
const refreshPipeline = 256

// RefreshAll renews a round of leases with one Sync, then every node's
// Exists at once, pipelined on the session's one connection (at most
// refreshPipeline in flight): n renewals cost n+1 requests and about one
// round trip, where n Refresh calls cost 2n requests, at most 16 at a time
// (the portable layer's bound for drivers without a batch). One Sync is
// enough: ZooKeeper answers a session's requests in order, so every Exists
// sent after the Sync's answer is answered from a state at least as new as
// the leader's when it got the Sync, which is what Refresh's own Sync
// buys (TestStaleFollowerRefresh runs through this path).
func (d *Driver) RefreshAll(ctx context.Context, locks []backend.Lock, _ []time.Duration) []error {
	errs := make([]error, len(locks))
	var todo []*lockNode
	var at []int
	for i, l := range locks {
		n, ok := l.(*lockNode)
		switch {
		case !ok || n.d != d:
			errs[i] = fmt.Errorf("zklock: refresh: %w: %T is not a lock of this driver", backend.ErrInvalidConfig, l)
		default:
			if errs[i] = n.refreshable(); errs[i] == nil {
				todo, at = append(todo, n), append(at, i)
			}
		}
	}
	if len(todo) == 0 {
		return errs
	}
	results := make([]existsResult, len(todo))
	var syncErr error
	err := d.do(ctx, func() {
		if _, syncErr = d.conn.Sync(todo[0].path); syncErr != nil {
			return
		}
		sem := make(chan struct{}, refreshPipeline)
		var wg sync.WaitGroup
		for j, n := range todo {
			sem <- struct{}{}
			wg.Go(func() {
				defer func() { <-sem }()
				r := &results[j]
				r.exists, r.stat, r.err = d.conn.Exists(n.path)
			})
		}
		wg.Wait()
	})
	for j, n := range todo {
		switch {
		case err != nil:
			errs[at[j]] = failure("refresh", n.key, err)
		case syncErr != nil:
			errs[at[j]] = failure("refresh", n.key, syncErr)
		default:
			errs[at[j]] = n.refreshed(results[j])
		}
	}
	return errs
}
