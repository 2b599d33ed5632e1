package conformance_test

import (
	"context"
	"errors"
	"time"

	"github.com/distlock/distlock/backend"
	"github.com/distlock/distlock/internal/shim"
	"github.com/distlock/distlock/memlock"
)

// brokenMultiStep wraps a memlock driver (under the lossy wrapper) with a
// TryAcquireMulti that has one classic bug, for brokenDrivers. It keeps
// the store's declared MultiAtomic, so the portable layer uses it.
type brokenMultiStep struct {
	shim.Notifier
	bug multiBug
}

type multiBug int

const (
	multiStepByStep   multiBug = iota // takes key after key, a round trip apart, and gives them back when one is held
	multiKeepsPart                    // takes key after key and keeps what it took when one is held
	multiFirstKeyOnly                 // checks only the first key: the others are "granted" whoever holds them
)

func wrapMulti(bug multiBug) func(*memlock.Store, backend.Driver) backend.Driver {
	return func(_ *memlock.Store, d backend.Driver) backend.Driver {
		return &brokenMultiStep{Notifier: shim.Notifier{Driver: d}, bug: bug}
	}
}

// stepLatency is the round trip between the steps of a multi-lock taken
// key by key.
const stepLatency = 2 * time.Millisecond

// RefreshAll completes the Batcher; the driver declares no BatchRefresh.
func (d *brokenMultiStep) RefreshAll(_ context.Context, locks []backend.Lock, _ []time.Duration) []error {
	errs := make([]error, len(locks))
	for i := range errs {
		errs[i] = backend.ErrUnsupported
	}
	return errs
}

func (d *brokenMultiStep) TryAcquireMulti(ctx context.Context, reqs []backend.Request) ([]backend.Grant, error) {
	var grants []backend.Grant
	for i, req := range reqs {
		if i > 0 {
			time.Sleep(stepLatency)
		}
		g, err := d.Driver.TryAcquire(ctx, req)
		switch {
		case err == nil:
			grants = append(grants, g)
		case i > 0 && d.bug == multiFirstKeyOnly && errors.Is(err, backend.ErrNotAcquired):
			grants = append(grants, backend.Grant{Lock: nopLock{}, Token: 1 << 40})
		default:
			if d.bug != multiKeepsPart {
				for _, g := range grants {
					_ = g.Lock.Release(context.WithoutCancel(ctx))
				}
			}
			return nil, err
		}
	}
	return grants, nil
}
