package zklock

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/distlock/distlock/backend"
)

// userSession is the session timeout of the user-made connections below:
// long enough that go-zookeeper's receive timeout (2/3 of it) cannot pass
// before the test has looked, on a busy machine.
const userSession = 12 * time.Second

// TestUserConnCloseDuringStall: Close of a driver over a user's
// connection does not wait for a go-zookeeper call still out on that
// connection. go-zookeeper's calls take no ctx: do gives up on them at
// its ctx, and they return only when go-zookeeper does (its receive
// timeout, 2/3 of the session timeout, for a request sent; a reconnect's
// handshake, up to ten times that, for one still queued). The driver
// cannot close a connection it does not own to cut that short.
func TestUserConnCloseDuringStall(t *testing.T) {
	c := startCluster(t, 1)
	h := newHarness(c)
	t.Cleanup(func() { _ = h.Close() })
	d, conn, err := c.newUserDriver(context.Background(), userSession, &Options{SessionTimeout: userSession})
	if conn != nil {
		h.users = append(h.users, conn)
	}
	if err != nil {
		t.Fatal(err)
	}
	g, err := d.TryAcquire(context.Background(), backend.Request{Key: "stall-close", Owner: "o", TTL: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	if err := h.Partition(context.Background(), d); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	if err := g.Lock.Refresh(ctx, time.Second); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Refresh over a stalled path = %v, want its ctx's deadline", err)
	}
	// The Sync is out, unanswered: go-zookeeper returns it when its
	// receive timeout ends the connection (the state leaves HasSession
	// first).
	start := time.Now()
	if err := d.Close(); err != nil {
		t.Fatal(err)
	}
	took := time.Since(start)
	if s := conn.State(); s != zk.StateHasSession {
		t.Fatalf("Close returned after %v, when go-zookeeper had given up the connection (state %v): it waited for the call it had abandoned", took, s)
	}
	t.Logf("Close took %v with a call out", took)
	_ = h.Heal(context.Background(), d)
}
