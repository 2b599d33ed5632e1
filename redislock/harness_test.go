package redislock

import (
	"github.com/redis/go-redis/v9"

	"github.com/distlock/distlock/backend"
	"github.com/distlock/distlock/internal/redisproto/redistest"
	"github.com/distlock/distlock/sandbox"
)

// newHarness returns the Redis test harness over this package's Driver in
// mode "single" or "cluster"; its drivers get the Options in Opts.
func newHarness(g *sandbox.Group, mode string) *redistest.With[Options] {
	return redistest.NewWith(g, mode, func(cs []redis.UniversalClient, o *Options) (backend.Driver, error) {
		return New(cs[0], o)
	}, func(d backend.Driver) {
		if d, ok := d.(*Driver); ok {
			_ = d.notify.Close()
		}
	})
}

// The harness's helpers, by their names in this package's tests.
var (
	nodeClient          = redistest.NodeClient
	mustHold            = redistest.MustHold
	restart             = redistest.Restart
	distlockUnavailable = redistest.Unavailable
)
