package zklock

import (
	"testing"
	"time"

	"github.com/distlock/distlock/backend"
)

// TestRWRequests counts, on the server (mntr), the requests of an
// uncontended read or write acquire + release (docs/primitives.md quotes
// them): the create (one multi), the read of the line, the fence node
// (read by a reader, set by a writer), and the delete: four each.
func TestRWRequests(t *testing.T) {
	c, ctx, d, _ := countedDriver(t)
	key := uniqueKey(t)
	addr := c.g.Addrs()[0]
	const n = 20
	for _, mode := range []backend.Kind{backend.Write, backend.Read} {
		pair := func() {
			g, err := d.tryRW(ctx, backend.Request{Key: key, Owner: "o", TTL: 10 * time.Second}, mode, false)
			if err != nil {
				t.Fatal(err)
			}
			if err := g.Lock.Release(ctx); err != nil {
				t.Fatal(err)
			}
		}
		pair() // warm-up: the parent and fence nodes exist
		before := packetsReceived(t, addr)
		for range n {
			pair()
		}
		got := packetsReceived(t, addr) - before
		t.Logf("%v: %d requests for %d acquire+release pairs", mode, got, n)
		if got < 4*n || got > 4*n+3 { // a ping or two may fall in
			t.Errorf("%v: %d pairs sent %d requests, want %d (4 each)", mode, n, got, 4*n)
		}
	}
}
