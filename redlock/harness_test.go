package redlock

import (
	"testing"
	"time"

	"github.com/distlock/distlock/backend"
	"github.com/distlock/distlock/internal/redisproto/redistest"
	"github.com/distlock/distlock/sandbox"
	"github.com/redis/go-redis/v9"
)

// newHarness returns the Redis test harness in mode "redlock" over this
// package's Driver, one client per node of g; its drivers get the Options
// in Opts. Its conformance cases run at a TTL of 3 s: Redlock gives each
// node TTL/9 to answer, and at 1 s (111 ms) concurrent TryAcquires on two
// cores busy with other work overran it (no answer, nothing granted), in
// either wait mode.
func newHarness(g *sandbox.Group) *redistest.With[Options] {
	h := redistest.NewWith(g, "redlock", func(cs []redis.UniversalClient, o *Options) (backend.Driver, error) {
		return New(cs, o)
	}, func(d backend.Driver) {
		if d, ok := d.(*Driver); ok {
			for _, n := range d.nodes {
				_ = n.notify.Close()
			}
		}
	})
	h.SetTTL(3 * time.Second)
	return h
}

// The harness's helpers, by their names in this package's tests.
var (
	nodeClient        = redistest.NodeClient
	nodeClients       = redistest.NodeClients
	loadScripts       = redistest.LoadScripts
	grantedEverywhere = redistest.GrantedEverywhere
	mustHold          = redistest.MustHold
	restart           = redistest.Restart
)

// nodeDriver returns a driver with the default options over clients of
// its own of g's nodes, which it returns too; the driver is closed when t
// ends.
func nodeDriver(t *testing.T, g *sandbox.Group) (*Driver, []redis.UniversalClient) {
	t.Helper()
	clients := nodeClients(t, g)
	r, err := New(clients, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.Close() })
	return r, clients
}
