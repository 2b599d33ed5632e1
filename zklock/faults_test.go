package zklock

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/distlock/distlock"
	"github.com/distlock/distlock/internal/testctx"
)

// client is one Locker over its own session, with its network path.
type client struct {
	*distlock.Locker
	d *Driver
	k *netPath
}

func newClient(t *testing.T, c *cluster, session time.Duration) *client {
	t.Helper()
	return newClientAt(t, c, session, c.g.Addrs())
}

// newClientAt is newClient connecting only to hosts.
func newClientAt(t *testing.T, c *cluster, session time.Duration, hosts []string) *client {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	d, k, err := c.newDriverAt(ctx, session, hosts)
	if err != nil {
		t.Fatalf("newDriver: %v", err)
	}
	l := distlock.New(d, distlock.WithDefaultTTL(session))
	t.Cleanup(func() { _ = l.Close() })
	return &client{Locker: l, d: d, k: k}
}

// ctxFor returns a context that ends after d (testctx.For).
var ctxFor = testctx.For

func uniqueKey(t *testing.T) string { return fmt.Sprintf("%s-%s", t.Name(), newGUID()[:8]) }

// waitQueue waits until key's queue has n nodes.
func waitQueue(t *testing.T, c *cluster, key string, n int) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		q, err := c.queue(key)
		if err == nil && len(q) == n {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("queue of %q has %d nodes (%v), want %d", key, len(q), err, n)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// grantedAt starts b's Acquire of key and returns a channel that gets the
// time the lock was granted (then released at once), or is closed when
// the Acquire failed (failing t).
func grantedAt(t *testing.T, b *client, key string) <-chan time.Time {
	granted := make(chan time.Time, 1)
	go func() {
		lb, err := b.Acquire(ctxFor(t, 60*time.Second), key)
		if err != nil {
			t.Errorf("b: %v", err)
			close(granted)
			return
		}
		granted <- time.Now()
		_ = lb.Release(ctxFor(t, 10*time.Second))
	}()
	return granted
}

// eventually polls cond every 50ms until it holds or d passes.
func eventually(d time.Duration, cond func() bool) bool {
	deadline := time.Now().Add(d)
	for {
		if cond() {
			return true
		}
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// TestPartitionedHolder: a holder cut off from ZooKeeper for longer than its
// session timeout reports its lease lost before anyone else holds the lock.
func TestPartitionedHolder(t *testing.T) {
	c := startCluster(t, 1)
	key := uniqueKey(t)
	a, b := newClient(t, c, testSession), newClient(t, c, testSession)
	la, err := a.Acquire(ctxFor(t, 10*time.Second), key)
	if err != nil {
		t.Fatal(err)
	}
	gotB := grantedAt(t, b, key)
	waitQueue(t, c, key, 2)
	a.k.block(true) // partition: connections cut, no new ones
	tb, ok := <-gotB
	if !ok {
		t.Fatal("b never got the lock")
	}
	select {
	case <-la.Done():
	default:
		t.Fatal("b holds the lock but a's lease is not reported lost")
	}
	if !errors.Is(la.Err(), distlock.ErrLost) {
		t.Errorf("a's Err() = %v, want ErrLost", la.Err())
	}
	if dl := la.Deadline(); !dl.Before(tb) {
		t.Errorf("a's lease was valid until %v, but b held the lock at %v", dl.Format(time.StampMicro), tb.Format(time.StampMicro))
	}
	t.Logf("a lost its lease: %v; b acquired %v after a's deadline", la.Err(), tb.Sub(la.Deadline()))

	// Healed: a gets a new session (the old one expired) and works again.
	a.k.block(false)
	var lastErr error
	ok = eventually(30*time.Second, func() bool {
		var l *distlock.Lease
		l, lastErr = a.TryAcquire(ctxFor(t, 5*time.Second), key+"-after")
		if lastErr == nil {
			_ = l.Release(ctxFor(t, 5*time.Second))
		}
		return lastErr == nil
	})
	if !ok {
		t.Fatalf("after the partition healed, a could not acquire: %v", lastErr)
	}
}

// TestBlipKeepsLock: a connection drop shorter than the session timeout
// keeps the lock (the client reconnects within the session).
func TestBlipKeepsLock(t *testing.T) {
	c := startCluster(t, 1)
	key := uniqueKey(t)
	a, b := newClient(t, c, 4*time.Second), newClient(t, c, testSession)
	la, err := a.Acquire(ctxFor(t, 10*time.Second), key)
	if err != nil {
		t.Fatal(err)
	}
	a.k.cut(false) // connections dropped; redialling allowed
	time.Sleep(500 * time.Millisecond)
	if _, err := b.TryAcquire(ctxFor(t, 5*time.Second), key); !errors.Is(err, distlock.ErrNotAcquired) {
		t.Fatalf("during the blip, another client's TryAcquire = %v, want ErrNotAcquired", err)
	}
	time.Sleep(4 * time.Second)
	if la.Err() != nil {
		t.Fatalf("a short connection drop lost the lease: %v", la.Err())
	}
	if err := la.Release(ctxFor(t, 10*time.Second)); err != nil {
		t.Fatalf("release after the blip: %v", err)
	}
}

// TestWaiterSessionExpires: a waiter cut off until its session expired gets
// ErrLost when it reconnects, never the lock, and its place is gone.
func TestWaiterSessionExpires(t *testing.T) {
	c := startCluster(t, 1)
	key := uniqueKey(t)
	h, w := newClient(t, c, testSession), newClient(t, c, testSession)
	lh, err := h.Acquire(ctxFor(t, 10*time.Second), key)
	if err != nil {
		t.Fatal(err)
	}
	result := make(chan error, 1)
	go func() {
		l, err := w.Acquire(ctxFor(t, 60*time.Second), key)
		if err == nil {
			_ = l.Release(ctxFor(t, 10*time.Second))
		}
		result <- err
	}()
	waitQueue(t, c, key, 2)
	// Let the waiter set its watch on the holder's node: a partition before
	// that fails the wait with ErrUnavailable, which the portable layer
	// retries in a new session once the partition heals.
	time.Sleep(500 * time.Millisecond)
	w.k.block(true)
	waitQueue(t, c, key, 1) // the server expired the waiter's session
	if err := lh.Release(ctxFor(t, 10*time.Second)); err != nil {
		t.Fatal(err)
	}
	w.k.block(false)
	select {
	case err := <-result:
		if !errors.Is(err, distlock.ErrLost) {
			t.Fatalf("waiter whose session expired: %v, want ErrLost", err)
		}
		t.Logf("waiter: %v", err)
	case <-time.After(30 * time.Second):
		t.Fatal("waiter whose session expired never returned")
	}
	waitQueue(t, c, key, 0)
}

// TestTokensAcrossCleanupAndRestart: fencing tokens keep growing when the
// key's parent node is removed (which restarts the sequence numbers) and
// when the server restarts.
func TestTokensAcrossCleanupAndRestart(t *testing.T) {
	c := startCluster(t, 1)
	key := uniqueKey(t)
	take := func(what string, last uint64) uint64 {
		t.Helper()
		cl := newClient(t, c, testSession)
		le, err := cl.Acquire(ctxFor(t, 30*time.Second), key)
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		if le.Token() <= last {
			t.Errorf("%s: token %d, not greater than %d", what, le.Token(), last)
		}
		// The token comes from the create's multi reply (the parent's
		// mzxid); it must be the node's czxid, which Inspect reads.
		if info, err := cl.d.inspectMutex(ctxFor(t, 10*time.Second), key); err != nil {
			t.Errorf("%s: inspect: %v", what, err)
		} else if info.Token != le.Token() {
			t.Errorf("%s: lease token %#x, but the holder's node has czxid %#x", what, le.Token(), info.Token)
		}
		if q, err := c.queue(key); err == nil && len(q) == 1 {
			t.Logf("%s: token (czxid) %#x, sequence suffix %d", what, le.Token(), q[0].seq)
		}
		if err := le.Release(ctxFor(t, 10*time.Second)); err != nil {
			t.Fatal(err)
		}
		return le.Token()
	}
	t1 := take("first", 0)
	t2 := take("second", t1)
	parent := defaultBase + "/" + encodeKey(key)
	if err := c.admin.Delete(parent, -1); err != nil {
		t.Fatalf("removing the empty parent: %v", err)
	}
	t3 := take("after parent cleanup", t2) // its sequence suffix restarted at 0
	c.admin.Close()
	n := c.g.Node(0)
	if err := n.Stop(ctxFor(t, time.Minute)); err != nil {
		t.Fatal(err)
	}
	if err := n.Start(ctxFor(t, 2*time.Minute)); err != nil {
		t.Fatal(err)
	}
	if err := c.g.Wait(ctxFor(t, time.Minute)); err != nil {
		t.Fatal(err)
	}
	take("after a server restart", t3)
}
