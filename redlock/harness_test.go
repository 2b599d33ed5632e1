package redlock

import (
	"github.com/redis/go-redis/v9"

	"github.com/distlock/distlock/backend"
	"github.com/distlock/distlock/conformance"
	"github.com/distlock/distlock/internal/redisproto/redistest"
	"github.com/distlock/distlock/sandbox"
)

// harness is the Redis test harness (redistest.Harness) in mode
// "redlock" over this package's Driver, whose drivers get opts.
type harness struct {
	*redistest.Harness
	opts *Options
}

func newHarness(g *sandbox.Group) *harness {
	h := &harness{}
	h.Harness = redistest.NewHarness(g, "redlock", func(cs []redis.UniversalClient) (backend.Driver, error) {
		return New(cs, h.opts)
	}, func(d backend.Driver) {
		if d, ok := d.(*Driver); ok {
			for _, n := range d.nodes {
				_ = n.notify.Close()
			}
		}
	})
	return h
}

func (h *harness) maker() conformance.Maker { return h.Maker() }

// The harness's helpers, by their names in this package's tests.
var (
	nodeClient        = redistest.NodeClient
	mustHold          = redistest.MustHold
	restart           = redistest.Restart
	nodeClients       = redistest.NodeClients
	loadScripts       = redistest.LoadScripts
	grantedEverywhere = redistest.GrantedEverywhere
)
