package zklock

import (
	"errors"
	"testing"
	"time"

	"github.com/distlock/distlock/backend"
	"github.com/distlock/distlock/sandbox"
)

// TestGhostReapedWhenSessionBack: a TryAcquire whose create reply was lost
// with the connection leaves a node the reaper must delete, and it can do
// so only once the session is back. It deletes it then, woken by the
// session's return, not at its next periodic retry: the ghost would hold
// the lock meanwhile (on a busy machine, for longer than a TTL). The
// periodic retry is made an hour here, so only the wake-up can reap in
// time. Both kinds of connection: one the driver made (state from its
// event callback) and one passed to New (state polled).
func TestGhostReapedWhenSessionBack(t *testing.T) {
	old := reapRetry
	reapRetry = time.Hour
	t.Cleanup(func() { reapRetry = old })
	c := startCluster(t, 1)
	// A long session: it survives the blip, so the ghost lives in it.
	const session = 10 * time.Second
	for _, user := range []bool{false, true} {
		name := "owned"
		if user {
			name = "user"
		}
		t.Run(name, func(t *testing.T) {
			var d *Driver
			if user {
				ud, conn, err := c.newUserDriver(ctxFor(t, 30*time.Second), session, &Options{SessionTimeout: session})
				if conn != nil {
					t.Cleanup(conn.Close)
				}
				if err != nil {
					t.Fatal(err)
				}
				d = ud
			} else {
				od, _, err := c.newDriver(ctxFor(t, 30*time.Second), session)
				if err != nil {
					t.Fatal(err)
				}
				d = od
			}
			t.Cleanup(func() { _ = d.Close() })
			np, err := c.pathOf(d)
			if err != nil {
				t.Fatal(err)
			}
			key := uniqueKey(t)
			first := d.conn.SessionID()
			// The key's container exists, so the create is the one request
			// the acquisition makes first.
			g, err := d.TryAcquire(ctxFor(t, 10*time.Second), backend.Request{Key: key, Owner: "a", TTL: session})
			if err != nil {
				t.Fatal(err)
			}
			if err := g.Lock.Release(ctxFor(t, 10*time.Second)); err != nil {
				t.Fatal(err)
			}

			// The create's reply is dropped and its connection closed;
			// new connections are refused until the driver has given
			// up on the create, so the reaper's first try finds no
			// session.
			np.dropAfter(opcodeLockCreate)
			np.each(func(p *sandbox.Proxy) { p.Refuse(true) })
			_, err = d.TryAcquire(ctxFor(t, 30*time.Second), backend.Request{Key: key, Owner: "a", TTL: session})
			if !np.dropped() || !errors.Is(err, backend.ErrUnavailable) {
				t.Fatalf("precondition: the create's reply was not lost (dropped %v, TryAcquire: %v)", np.dropped(), err)
			}
			if q, err := c.queue(key); err != nil || len(q) != 1 {
				t.Fatalf("precondition: the create made no ghost: queue %v (%v)", q, err)
			}
			np.each(func(p *sandbox.Proxy) { p.Heal() })

			back := eventually(20*time.Second, func() bool { return d.conn.SessionID() == first && d.conn.State().String() == "StateHasSession" })
			if !back || d.conn.SessionID() != first {
				t.Fatalf("precondition: the session did not come back (id %#x, was %#x)", d.conn.SessionID(), first)
			}
			restored := time.Now()
			var q []entry
			if !eventually(5*time.Second, func() bool {
				q, err = c.queue(key)
				return err == nil && len(q) == 0
			}) {
				t.Fatalf("the ghost of the lost create still holds the lock %v after the session came back: queue %v (%v)", time.Since(restored).Round(time.Millisecond), q, err)
			}
			t.Logf("ghost reaped %v after the session was seen back", time.Since(restored).Round(time.Millisecond))
		})
	}
}
