package redislock

import (
	"github.com/redis/go-redis/v9"

	"github.com/distlock/distlock/backend"
	"github.com/distlock/distlock/conformance"
	"github.com/distlock/distlock/internal/redisproto/redistest"
	"github.com/distlock/distlock/sandbox"
)

// harness is the Redis test harness (redistest.Harness) over this
// package's Driver in mode "single" or "cluster", whose drivers get opts.
type harness struct {
	*redistest.Harness
	opts *Options
}

func newHarness(g *sandbox.Group, mode string) *harness {
	h := &harness{}
	h.Harness = redistest.NewHarness(g, mode, func(cs []redis.UniversalClient) (backend.Driver, error) {
		return New(cs[0], h.opts)
	}, func(d backend.Driver) {
		if d, ok := d.(*Driver); ok {
			_ = d.notify.Close()
		}
	})
	return h
}

func (h *harness) maker() conformance.Maker { return h.Maker() }

// The harness's helpers, by their names in this package's tests.
var (
	nodeClient          = redistest.NodeClient
	mustHold            = redistest.MustHold
	restart             = redistest.Restart
	distlockUnavailable = redistest.Unavailable
)
