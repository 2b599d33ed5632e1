package conformance_test

import (
	"context"
	"errors"
	"time"

	"github.com/distlock/distlock/backend"
	"github.com/distlock/distlock/memlock"
)

// The read-write lock bugs the RW cases must catch, each a wrapper around
// memlock's read-write locks (listed in brokenDrivers).
const (
	rwNoExclusion = "rw-writer-granted-over-holders" // a refused write is granted anyway
	rwNoMark      = "rw-writer-leaves-no-mark"       // waiting writers never keep readers out
	rwConstTokens = "rw-repeated-tokens"             // every grant has token 1
	rwKeepMark    = "rw-withdraw-does-nothing"       // a writer that gave up keeps readers out
	rwUpgradeWait = "rw-upgrade-waits"               // the store's upgrade refusal becomes a wait
	rwStoreTTL    = "rw-ttl-not-applied"             // the store keeps locks an hour
)

func brokenRWOf(bug string) func(*memlock.Store, backend.Driver) backend.Driver {
	return func(_ *memlock.Store, d backend.Driver) backend.Driver {
		return &brokenRW{Driver: d, mem: d.(*lossy).mem(), bug: bug}
	}
}

type brokenRW struct {
	backend.Driver
	mem *memlock.Driver
	bug string
}

func (d *brokenRW) Subscribe(ctx context.Context, key string, kind backend.Kind) (<-chan struct{}, func(), error) {
	return d.mem.Subscribe(ctx, key, kind)
}

func (d *brokenRW) TryAcquire(ctx context.Context, req backend.Request) (backend.Grant, error) {
	mode := req.Kind
	if mode != backend.Read && mode != backend.Write {
		return d.Driver.TryAcquire(ctx, req)
	}
	switch d.bug {
	case rwNoMark:
		req.Waiting = false
	case rwStoreTTL:
		req.TTL = time.Hour
	}
	g, err := d.mem.TryAcquire(ctx, req)
	switch {
	case d.bug == rwNoExclusion && mode == backend.Write && errors.Is(err, backend.ErrNotAcquired):
		return backend.Grant{Lock: nopLock{}, Token: 1 << 40}, nil
	case d.bug == rwConstTokens && err == nil:
		g.Token = 1
	case d.bug == rwUpgradeWait && errors.Is(err, backend.ErrUpgrade):
		return g, backend.NotAcquired(req.Key, 0)
	case d.bug == rwStoreTTL && err == nil:
		g.TTL = 0 // the lease counts the TTL asked for
	}
	return g, err
}

func (d *brokenRW) Withdraw(ctx context.Context, req backend.Request) error {
	if d.bug == rwKeepMark {
		return nil
	}
	return d.mem.Withdraw(ctx, req)
}
