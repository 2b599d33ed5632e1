package zklock

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/distlock/distlock"
)

// client is one Locker over its own session, with its kill switch.
type client struct {
	*distlock.Locker
	d *Driver
	k *killSwitch
}

func newClient(t *testing.T, c *cluster, session time.Duration) *client {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	d, k, err := c.newDriver(ctx, session)
	if err != nil {
		t.Fatalf("newDriver: %v", err)
	}
	l := distlock.New(d, distlock.WithDefaultTTL(session))
	t.Cleanup(func() { _ = l.Close() })
	return &client{Locker: l, d: d, k: k}
}

func ctxFor(t *testing.T, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

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

// TestFIFO: waiters are served in the order they queued.
func TestFIFO(t *testing.T) {
	c := startCluster(t, 1)
	key := uniqueKey(t)
	holder := newClient(t, c, testSession)
	le, err := holder.Acquire(ctxFor(t, 10*time.Second), key)
	if err != nil {
		t.Fatal(err)
	}
	const n = 5
	var mu sync.Mutex
	var order []int
	var wg sync.WaitGroup
	for i := range n {
		w := newClient(t, c, testSession)
		wg.Go(func() {
			lw, err := w.Acquire(ctxFor(t, 60*time.Second), key)
			if err != nil {
				t.Errorf("waiter %d: %v", i, err)
				return
			}
			mu.Lock()
			order = append(order, i)
			mu.Unlock()
			time.Sleep(20 * time.Millisecond)
			if err := lw.Release(ctxFor(t, 10*time.Second)); err != nil {
				t.Errorf("waiter %d release: %v", i, err)
			}
		})
		waitQueue(t, c, key, i+2)
	}
	if err := le.Release(ctxFor(t, 10*time.Second)); err != nil {
		t.Fatal(err)
	}
	wg.Wait()
	for i, got := range order {
		if got != i {
			t.Fatalf("waiters were served in order %v, want 0..%d", order, n-1)
		}
	}
	if len(order) != n {
		t.Fatalf("only %d of %d waiters got the lock", len(order), n)
	}
}

// TestBlipKeepsPlace: a waiter whose connection drops briefly keeps its
// place in line (the retried wait reuses its node).
func TestBlipKeepsPlace(t *testing.T) {
	c := startCluster(t, 1)
	key := uniqueKey(t)
	h, w1, w2 := newClient(t, c, 4*time.Second), newClient(t, c, 4*time.Second), newClient(t, c, 4*time.Second)
	lh, err := h.Acquire(ctxFor(t, 10*time.Second), key)
	if err != nil {
		t.Fatal(err)
	}
	order := make(chan int, 2)
	var wg sync.WaitGroup
	for i, w := range []*client{w1, w2} {
		wg.Go(func() {
			l, err := w.Acquire(ctxFor(t, 60*time.Second), key)
			if err != nil {
				t.Errorf("waiter %d: %v", i+1, err)
				return
			}
			order <- i + 1
			time.Sleep(20 * time.Millisecond)
			_ = l.Release(ctxFor(t, 10*time.Second))
		})
		waitQueue(t, c, key, i+2)
	}
	time.Sleep(300 * time.Millisecond) // both watch their predecessor
	w1.k.cut(false)                    // w1's connection drops; it redials
	time.Sleep(1500 * time.Millisecond)
	if q, _ := c.queue(key); len(q) != 3 {
		t.Errorf("queue after the blip has %d nodes, want 3 (no duplicate, no lost place)", len(q))
	}
	if err := lh.Release(ctxFor(t, 10*time.Second)); err != nil {
		t.Fatal(err)
	}
	wg.Wait()
	close(order)
	if first := <-order; first != 1 {
		t.Errorf("waiter %d got the lock first; the blip cost waiter 1 its place", first)
	}
}

// TestDeadWaiterInMiddle: a waiter whose process died, queued between two
// live ones, neither takes the lock nor hands it on early: the waiter
// behind it gets the lock only after the one before it released.
func TestDeadWaiterInMiddle(t *testing.T) {
	c := startCluster(t, 1)
	key := uniqueKey(t)
	h, w1, w2, w3 := newClient(t, c, testSession), newClient(t, c, testSession), newClient(t, c, testSession), newClient(t, c, testSession)
	le, err := h.Acquire(ctxFor(t, 10*time.Second), key)
	if err != nil {
		t.Fatal(err)
	}
	var w1Released, w3Got atomic.Int64
	got1 := make(chan *distlock.Lease, 1)
	go func() {
		l, err := w1.Acquire(ctxFor(t, 60*time.Second), key)
		if err != nil {
			t.Errorf("w1: %v", err)
			close(got1)
			return
		}
		got1 <- l
	}()
	waitQueue(t, c, key, 2)
	dead := make(chan error, 1)
	go func() {
		_, err := w2.Acquire(ctxFor(t, 4*testSession), key)
		dead <- err
	}()
	waitQueue(t, c, key, 3)
	got3 := make(chan error, 1)
	go func() {
		l, err := w3.Acquire(ctxFor(t, 60*time.Second), key)
		if err == nil {
			w3Got.Store(time.Now().UnixNano())
			err = l.Release(ctxFor(t, 10*time.Second))
		}
		got3 <- err
	}()
	waitQueue(t, c, key, 4)
	w2.k.cut(true) // w2's process dies while waiting

	if err := le.Release(ctxFor(t, 10*time.Second)); err != nil {
		t.Fatal(err)
	}
	l1, ok := <-got1
	if !ok {
		t.Fatal("w1 did not get the lock")
	}
	// Hold well past the dead waiter's session expiry: w3 must keep waiting.
	time.Sleep(3 * testSession)
	if w3Got.Load() != 0 {
		t.Fatal("w3 got the lock while w1 held it: the dead waiter handed it on early")
	}
	if l1.Err() != nil {
		t.Fatalf("w1's lease ended: %v", l1.Err())
	}
	w1Released.Store(time.Now().UnixNano())
	if err := l1.Release(ctxFor(t, 10*time.Second)); err != nil {
		t.Fatal(err)
	}
	if err := <-got3; err != nil {
		t.Fatalf("w3: %v", err)
	}
	if w3Got.Load() < w1Released.Load() {
		t.Error("w3 got the lock before w1 released it")
	}
	if err := <-dead; err == nil {
		t.Error("the dead waiter was granted the lock")
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
	gotB := make(chan time.Time, 1)
	go func() {
		lb, err := b.Acquire(ctxFor(t, 60*time.Second), key)
		if err != nil {
			t.Errorf("b: %v", err)
			close(gotB)
			return
		}
		gotB <- time.Now()
		_ = lb.Release(ctxFor(t, 10*time.Second))
	}()
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

// TestLostCreateReplyReused: a create whose reply is lost on a connection
// drop leaves no orphan: the retried acquisition finds and reuses the node.
func TestLostCreateReplyReused(t *testing.T) {
	c := startCluster(t, 1)
	key := uniqueKey(t)
	a := newClient(t, c, 4*time.Second)
	a.k.dropAfter(opcodeCreate)
	la, err := a.Acquire(ctxFor(t, 30*time.Second), key)
	if err != nil {
		t.Fatal(err)
	}
	if !a.k.dropped() {
		t.Fatal("the fault was not injected")
	}
	q, err := c.queue(key)
	if err != nil || len(q) != 1 {
		t.Fatalf("queue after the lost reply: %v, %v; want exactly the holder's node", q, err)
	}
	if err := la.Release(ctxFor(t, 10*time.Second)); err != nil {
		t.Fatal(err)
	}
	waitQueue(t, c, key, 0)

	// TryAcquire is not retried: the reaper deletes the orphan instead.
	key2 := key + "-try"
	a.k.dropAfter(opcodeCreate)
	if _, err := a.TryAcquire(ctxFor(t, 30*time.Second), key2); !errors.Is(err, distlock.ErrUnavailable) {
		t.Fatalf("TryAcquire with a lost reply = %v, want ErrUnavailable", err)
	}
	waitQueue(t, c, key2, 0)
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

// TestLeaderKilled: in a 3-node ensemble, killing the leader while a lock is
// held and others wait never grants the lock twice: the holder keeps it or
// is told it lost it before anyone else holds it.
func TestLeaderKilled(t *testing.T) {
	c := startCluster(t, 3)
	key := uniqueKey(t)
	const session = 4 * time.Second
	holder := newClient(t, c, session)
	lh, err := holder.Acquire(ctxFor(t, 10*time.Second), key)
	if err != nil {
		t.Fatal(err)
	}
	type grant struct {
		at time.Time
		le *distlock.Lease
	}
	grants := make(chan grant, 3)
	var wg sync.WaitGroup
	for range 3 {
		w := newClient(t, c, session)
		wg.Go(func() {
			l, err := w.Acquire(ctxFor(t, 90*time.Second), key)
			if errors.Is(err, distlock.ErrLost) {
				// The session expired during the election: queue again.
				t.Logf("waiter lost its place: %v", err)
				l, err = w.Acquire(ctxFor(t, 90*time.Second), key)
			}
			if err != nil {
				t.Errorf("waiter: %v", err)
				return
			}
			grants <- grant{time.Now(), l}
			time.Sleep(50 * time.Millisecond)
			_ = l.Release(ctxFor(t, 10*time.Second))
		})
	}
	waitQueue(t, c, key, 4)
	leader := leaderIndex(t, c)
	t.Logf("killing the leader, node %d", leader)
	if err := c.g.Node(leader).Kill(ctxFor(t, time.Minute)); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.g.Node(leader).Start(ctxFor(t, 2*time.Minute)) })
	time.Sleep(2 * session)
	released := time.Now()
	kept := lh.Err() == nil
	if kept {
		t.Logf("holder kept the lease through the election")
		if err := lh.Release(ctxFor(t, 20*time.Second)); err != nil {
			t.Logf("release after the election: %v", err)
		}
	} else {
		t.Logf("holder lost the lease during the election: %v", lh.Err())
	}
	wg.Wait()
	close(grants)
	for g := range grants {
		if kept && g.at.Before(released) {
			t.Errorf("a waiter got the lock at %v while the holder still held it (released %v)", g.at, released)
		}
		if !kept && !lh.Deadline().Before(g.at) {
			t.Errorf("a waiter got the lock at %v, before the lost holder's deadline %v", g.at, lh.Deadline())
		}
	}
}

// leaderIndex returns the index of the ensemble's leader, asked with the
// "srvr" four-letter command (go-zookeeper's FLWSrvr cannot parse the
// version line of ZooKeeper 3.8).
func leaderIndex(t *testing.T, c *cluster) int {
	t.Helper()
	leader := -1
	ok := eventually(30*time.Second, func() bool {
		for i, addr := range c.g.Addrs() {
			if strings.Contains(fourLetter(addr, "srvr"), "Mode: leader") {
				leader = i
				return true
			}
		}
		return false
	})
	if !ok {
		t.Fatal("no leader found")
	}
	return leader
}

// fourLetter sends a four-letter command and returns the answer ("" on error).
func fourLetter(addr, cmd string) string {
	conn, err := net.DialTimeout("tcp", addr, 2*time.Second)
	if err != nil {
		return ""
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(2 * time.Second))
	if _, err := conn.Write([]byte(cmd)); err != nil {
		return ""
	}
	out, _ := io.ReadAll(conn)
	return string(out)
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
