package zklock

import (
	"errors"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/distlock/distlock"
)

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

// TestLostCreateReplyReused: a create whose reply is lost on a connection
// drop leaves no orphan: the retried acquisition finds and reuses the node.
func TestLostCreateReplyReused(t *testing.T) {
	c := startCluster(t, 1)
	key := uniqueKey(t)
	a := newClient(t, c, 4*time.Second)
	a.k.dropAfter(opcodeLockCreate)
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
	a.k.dropAfter(opcodeLockCreate)
	if _, err := a.TryAcquire(ctxFor(t, 30*time.Second), key2); !errors.Is(err, distlock.ErrUnavailable) {
		t.Fatalf("TryAcquire with a lost reply = %v, want ErrUnavailable", err)
	}
	waitQueue(t, c, key2, 0)
}

// TestInspect: Inspect reports the holder, its token and the waiters.
func TestInspect(t *testing.T) {
	c := startCluster(t, 1)
	key := uniqueKey(t)
	h, w := newClient(t, c, testSession), newClient(t, c, testSession)
	info, err := h.d.inspectMutex(ctxFor(t, 10*time.Second), key)
	if err != nil || info.Held {
		t.Fatalf("Inspect of a free key = %+v, %v", info, err)
	}
	le, err := h.Acquire(ctxFor(t, 10*time.Second), key)
	if err != nil {
		t.Fatal(err)
	}
	waiting := make(chan struct{})
	go func() {
		defer close(waiting)
		lw, err := w.Acquire(ctxFor(t, 30*time.Second), key)
		if err == nil {
			_ = lw.Release(ctxFor(t, 10*time.Second))
		}
	}()
	waitQueue(t, c, key, 2)
	info, err = w.d.inspectMutex(ctxFor(t, 10*time.Second), key)
	if err != nil {
		t.Fatal(err)
	}
	if !info.Held || info.Owner != le.Owner() || info.Token != le.Token() || info.Waiters != 1 {
		t.Errorf("Inspect = %+v, want held by %q with token %d and 1 waiter", info, le.Owner(), le.Token())
	}
	if err := le.Release(ctxFor(t, 10*time.Second)); err != nil {
		t.Fatal(err)
	}
	<-waiting
}

// hostileNames are lock-node-like names the driver never creates: negative,
// signed, short, long or non-decimal sequence numbers, guids that are not
// 32 lower-case hex digits. Each would sort before (or among) real nodes if
// the queue accepted it.
func hostileNames() []string {
	g := strings.Repeat("ab", 16)
	return []string{
		"_c_" + g + "-lock--000000001",
		"_c_" + g + "-lock--2147483648",
		"_c_" + g + "-lock-+000000000",
		"_c_" + g + "-lock-000000000",
		"_c_" + g + "-lock-00000000000",
		"_c_" + g + "-lock- 000000000",
		"_c_" + g + "-lock-0x00000000",
		"_c_" + strings.ToUpper(g) + "-lock-0000000000",
		"_c_" + strings.Repeat("zz", 16) + "-lock-0000000000",
		"_c_" + strings.Repeat("-", 32) + "-lock-0000000000",
	}
}

// TestHostileChildrenIgnored: under an open ACL another client creates
// (persistent) children that look like lock nodes but that the driver could
// not have created; the lock still works: TryAcquire wins, Inspect reports
// no stranger, a waiter is handed the lock on release.
func TestHostileChildrenIgnored(t *testing.T) {
	c := startCluster(t, 1)
	key := uniqueKey(t)
	parent := defaultBase + "/" + encodeKey(key)
	for _, p := range []string{defaultBase, parent} {
		if _, err := c.admin.Create(p, nil, 0, zk.WorldACL(zk.PermAll)); err != nil && !errors.Is(err, zk.ErrNodeExists) {
			t.Fatal(err)
		}
	}
	for _, name := range hostileNames() {
		if _, err := c.admin.Create(parent+"/"+name, []byte("hostile"), 0, zk.WorldACL(zk.PermAll)); err != nil {
			t.Fatalf("create %s: %v", name, err)
		}
	}
	a, b := newClient(t, c, testSession), newClient(t, c, testSession)
	la, err := a.TryAcquire(ctxFor(t, 10*time.Second), key)
	if err != nil {
		t.Fatalf("TryAcquire with hostile children present: %v", err)
	}
	info, err := b.d.inspectMutex(ctxFor(t, 10*time.Second), key)
	if err != nil || !info.Held || info.Owner != la.Owner() || info.Waiters != 0 {
		t.Errorf("Inspect = %+v, %v; want held by %q, no waiters", info, err, la.Owner())
	}
	got := make(chan error, 1)
	go func() {
		lb, err := b.Acquire(ctxFor(t, 30*time.Second), key)
		if err == nil {
			err = lb.Release(ctxFor(t, 10*time.Second))
		}
		got <- err
	}()
	time.Sleep(200 * time.Millisecond)
	if err := la.Release(ctxFor(t, 10*time.Second)); err != nil {
		t.Fatal(err)
	}
	if err := <-got; err != nil {
		t.Fatalf("waiter behind hostile children: %v", err)
	}
}
