package etcdlock_test

import (
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/distlock/distlock"
	"github.com/distlock/distlock/backend"
	"github.com/distlock/distlock/etcdlock"
	"github.com/distlock/distlock/internal/testctx"
	"github.com/distlock/distlock/sandbox"
)

// faultPrefix is the key prefix of the fault tests.
const faultPrefix = "faults/"

// locker returns a Locker over its own client of endpoints, closed with t.
func locker(t *testing.T, endpoints ...string) (*distlock.Locker, *etcdlock.Driver) {
	t.Helper()
	return lockerTTL(t, testTTL, endpoints...)
}

// lockerTTL is locker with a lease TTL of ttl.
func lockerTTL(t *testing.T, ttl time.Duration, endpoints ...string) (*distlock.Locker, *etcdlock.Driver) {
	t.Helper()
	cli, err := clientv3.New(clientv3.Config{Endpoints: endpoints, DialTimeout: 10 * time.Second, Logger: zap.NewNop()})
	if err != nil {
		t.Fatalf("client: %v", err)
	}
	d, err := etcdlock.New(cli, &etcdlock.Options{Prefix: faultPrefix, TTL: ttl})
	if err != nil {
		t.Fatal(err)
	}
	l := distlock.New(d, distlock.WithDefaultTTL(ttl))
	t.Cleanup(func() {
		_ = l.Close()
		_ = cli.Close()
	})
	return l, d
}

// ctxT returns a context that ends after d (testctx.For).
var ctxT = testctx.For

// queued waits until key's range holds n keys (holder and waiters).
func queued(t *testing.T, d *etcdlock.Driver, key string, n int64) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		resp, err := d.Client().Get(ctxT(t, 5*time.Second), d.KeyRange(key), clientv3.WithPrefix(), clientv3.WithCountOnly())
		if err == nil && resp.Count == n {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("queue of %q never reached %d keys (last: %v, %v)", key, n, resp, err)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// heldWithTwo returns a fresh key named after name, its lease la held
// by a new Locker (whose driver is ad), and two more Lockers b and cl
// (b's driver bd), their drivers set to near, to queue behind it.
func heldWithTwo(t *testing.T, c *cluster, near int, name string) (key string, la *distlock.Lease, ad *etcdlock.Driver, b *distlock.Locker, bd *etcdlock.Driver, cl *distlock.Locker) {
	t.Helper()
	key = fmt.Sprintf("%s-%d", name, time.Now().UnixNano())
	a, ad := locker(t, c.g.Addrs()...)
	b, bd = locker(t, c.g.Addrs()...)
	cl, cd := locker(t, c.g.Addrs()...)
	etcdlock.SetNear(bd, near)
	etcdlock.SetNear(cd, near)
	la, err := a.Acquire(ctxT(t, 10*time.Second), key)
	if err != nil {
		t.Fatal(err)
	}
	return key, la, ad, b, bd, cl
}

// TestFaults runs the fault tests on one member; TestLeaderKilled needs
// a cluster of its own.
func TestFaults(t *testing.T) {
	c := startCluster(t, 1)
	// near is how many keys may be ahead of a waiter for it to watch them
	// all: the default, and 1, so that waiters further back watch only
	// their predecessor and move to watching the whole queue as it
	// advances.
	for _, near := range []int{etcdlock.DefaultNear, 1} {
		t.Run(fmt.Sprintf("FIFO/near=%d", near), func(t *testing.T) { testFIFO(t, c, near) })
		t.Run(fmt.Sprintf("DeadWaiterInTheMiddle/near=%d", near), func(t *testing.T) { testDeadWaiter(t, c, near) })
		t.Run(fmt.Sprintf("WaiterKeyDeleted/near=%d", near), func(t *testing.T) { testWaiterKeyDeleted(t, c, near) })
	}
	t.Run("PartitionedHolder", func(t *testing.T) { testPartitioned(t, c) })
	t.Run("DoubtPushed", func(t *testing.T) { testDoubtPushed(t, c) })
	t.Run("OwnerCmp", func(t *testing.T) { testOwnerCmp(t, c) })
	t.Run("RefreshAll", func(t *testing.T) { testRefreshAll(t, c) })
}

// testFIFO: waiters get the lock in the order they queued.
func testFIFO(t *testing.T, c *cluster, near int) {
	const n = 6
	key := fmt.Sprintf("fifo-%d", time.Now().UnixNano())
	holder, hd := locker(t, c.g.Addrs()...)
	le, err := holder.Acquire(ctxT(t, 10*time.Second), key)
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var order []int
	var wg sync.WaitGroup
	for i := range n {
		l, d := locker(t, c.g.Addrs()...)
		etcdlock.SetNear(d, near)
		wg.Go(func() {
			w, err := l.Acquire(ctxT(t, 30*time.Second), key)
			if err != nil {
				t.Errorf("waiter %d: %v", i, err)
				return
			}
			mu.Lock()
			order = append(order, i)
			mu.Unlock()
			_ = w.Release(ctxT(t, 5*time.Second))
		})
		queued(t, hd, key, int64(i+2))
	}
	info, err := hd.Inspect(ctxT(t, 5*time.Second), key, backend.Exclusive)
	if err != nil {
		t.Fatal(err)
	}
	if !info.Held || info.Owner != le.Owner() || info.Token != le.Token() || info.Waiters != n || info.TTL <= 0 {
		t.Errorf("Inspect = %+v, want held by %s with token %d, %d waiters and a TTL", info, le.Owner(), le.Token(), n)
	}
	if err := le.Release(ctxT(t, 5*time.Second)); err != nil {
		t.Fatal(err)
	}
	wg.Wait()
	for i, got := range order {
		if got != i {
			t.Fatalf("waiters got the lock in order %v, want 0..%d", order, n-1)
		}
	}
}

// testDeadWaiter: a waiter between the holder and another waiter dies; its
// key expires with its lease, and the waiter behind it must keep waiting
// for the holder instead of taking the lock early.
func testDeadWaiter(t *testing.T, c *cluster, near int) {
	key, la, ad, b, bd, cl := heldWithTwo(t, c, near, "deadwaiter")
	bErr := make(chan error, 1)
	go func() {
		_, err := b.Acquire(ctxT(t, 30*time.Second), key)
		bErr <- err
	}()
	queued(t, ad, key, 2)
	var got atomic.Pointer[distlock.Lease]
	cDone := make(chan error, 1)
	go func() {
		lc, err := cl.Acquire(ctxT(t, 30*time.Second), key)
		got.Store(lc)
		cDone <- err
	}()
	queued(t, ad, key, 3)
	if err := bd.Client().Close(); err != nil { // b dies; its key lives until its lease expires
		t.Fatal(err)
	}
	if err := <-bErr; err == nil {
		t.Fatal("the dead waiter got the lock")
	}
	queued(t, ad, key, 2) // b's key expired
	select {
	case err := <-cDone:
		t.Fatalf("the waiter behind a dead waiter took the lock while it was held (err %v)", err)
	case <-time.After(testTTL):
	}
	released := time.Now()
	if err := la.Release(ctxT(t, 5*time.Second)); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-cDone:
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("hand-off after the release took %v", time.Since(released))
		_ = got.Load().Release(ctxT(t, 5*time.Second))
	case <-time.After(testTTL):
		t.Fatal("the waiter did not get the lock after the holder released")
	}
}

// testWaiterKeyDeleted: the key of the last of two waiters is deleted
// behind its back; that waiter must fail with ErrLost and never get the
// lock, while the other waiter gets it as usual.
func testWaiterKeyDeleted(t *testing.T, c *cluster, near int) {
	key, la, ad, b, _, cl := heldWithTwo(t, c, near, "keydeleted")
	bGot := make(chan *distlock.Lease, 1)
	go func() {
		lb, err := b.Acquire(ctxT(t, 30*time.Second), key)
		if err != nil {
			t.Errorf("first waiter: %v", err)
		}
		bGot <- lb
	}()
	queued(t, ad, key, 2)
	cErr := make(chan error, 1)
	go func() {
		lc, err := cl.Acquire(ctxT(t, 30*time.Second), key)
		if err == nil {
			_ = lc.Release(ctxT(t, 5*time.Second))
			err = errors.New("got the lock")
		}
		cErr <- err
	}()
	queued(t, ad, key, 3)
	// Past the waiters' first 100 ms, during which they re-read the queue
	// (see waiter.go), so that only watching its key can tell the last
	// waiter that the key is gone.
	time.Sleep(150 * time.Millisecond)
	resp, err := ad.Client().Get(ctxT(t, 5*time.Second), ad.KeyRange(key), clientv3.WithPrefix(),
		clientv3.WithSort(clientv3.SortByCreateRevision, clientv3.SortDescend), clientv3.WithLimit(1))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := ad.Client().Delete(ctxT(t, 5*time.Second), string(resp.Kvs[0].Key)); err != nil {
		t.Fatal(err)
	}
	if err := la.Release(ctxT(t, 5*time.Second)); err != nil {
		t.Fatal(err)
	}
	lb := <-bGot
	if lb == nil {
		return
	}
	if err := lb.Release(ctxT(t, 5*time.Second)); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-cErr:
		if !errors.Is(err, distlock.ErrLost) {
			t.Fatalf("the waiter whose key was deleted: %v, want ErrLost", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the waiter whose key was deleted still waits")
	}
}

// testPartitioned: a holder cut off from etcd beyond its TTL reports the
// loss before anyone else can hold the lock.
func testPartitioned(t *testing.T, c *cluster) {
	key := fmt.Sprintf("partition-%d", time.Now().UnixNano())
	p := sandbox.StartProxyT(t, c.g.Node(0).Addr)
	a, _ := locker(t, p.Addr())
	b, _ := locker(t, c.g.Addrs()...)
	la, err := a.Acquire(ctxT(t, 10*time.Second), key)
	if err != nil {
		t.Fatal(err)
	}
	var lostAt atomic.Int64
	go func() {
		<-la.Done()
		lostAt.Store(time.Now().UnixNano())
	}()
	p.Blackhole(sandbox.Both)
	lb, err := b.Acquire(ctxT(t, 4*testTTL+10*time.Second), key)
	gotAt := time.Now()
	if err != nil {
		t.Fatalf("the partitioned holder's lock never became free: %v", err)
	}
	defer lb.Release(ctxT(t, 5*time.Second))
	if !la.Deadline().Before(gotAt) {
		t.Errorf("the partitioned holder was valid until %v, but another client held the lock at %v", la.Deadline(), gotAt)
	}
	at := lostAt.Load()
	if at == 0 || time.Unix(0, at).After(gotAt) {
		t.Errorf("the partitioned holder did not report the loss before another client held the lock")
	}
	if !errors.Is(la.Err(), distlock.ErrLost) {
		t.Errorf("Err() = %v, want ErrLost", la.Err())
	}
	t.Logf("loss reported %v before the other client held the lock", gotAt.Sub(time.Unix(0, at)))
}

// testDoubtPushed: a holder cut off from etcd is in doubt as soon as a
// lease renewal fails (the driver pushes it; the lease does not renew
// itself, so only the push can tell), and held again once renewals work
// within the lease's TTL.
func testDoubtPushed(t *testing.T, c *cluster) {
	key := fmt.Sprintf("doubt-%d", time.Now().UnixNano())
	p := sandbox.StartProxyT(t, c.g.Node(0).Addr)
	a, _ := locker(t, p.Addr())
	le, err := a.Acquire(ctxT(t, 10*time.Second), key, distlock.WithoutAutoRenew())
	if err != nil {
		t.Fatal(err)
	}
	defer le.Release(ctxT(t, 5*time.Second))
	waitState := func(want distlock.State, within time.Duration) time.Duration {
		t.Helper()
		start := time.Now()
		for le.State() != want {
			if time.Since(start) > within {
				t.Fatalf("State() = %v after %v, want %v (Err %v)", le.State(), within, want, le.Err())
			}
			time.Sleep(5 * time.Millisecond)
		}
		return time.Since(start)
	}
	cut := time.Now()
	p.Blackhole(sandbox.Both)
	// A renewal is sent every TTL/3 and given up after TTL/6.
	took := waitState(distlock.StateInDoubt, testTTL)
	if left := time.Until(le.Deadline()); left <= 0 {
		t.Fatalf("in doubt with no validity left (%v): the push came too late", left)
	}
	t.Logf("in doubt %v after the cut, deadline %v after the cut", took, le.Deadline().Sub(cut))
	p.Heal()
	back := waitState(distlock.StateHeld, testTTL)
	if le.Err() != nil {
		t.Fatalf("lost: %v", le.Err())
	}
	t.Logf("held again %v after the heal", back)
}

// testOwnerCmp: the exported comparison guards a write while the lock is
// held, and fails it once the lock is gone.
func testOwnerCmp(t *testing.T, c *cluster) {
	key := fmt.Sprintf("cmp-%d", time.Now().UnixNano())
	l, d := locker(t, c.g.Addrs()...)
	le, err := l.Acquire(ctxT(t, 10*time.Second), key)
	if err != nil {
		t.Fatal(err)
	}
	cmp, err := d.OwnerCmp(le.Key(), le.Token())
	if err != nil {
		t.Fatal(err)
	}
	data := "faults-data/" + key
	put := func() bool {
		resp, err := d.Client().Txn(ctxT(t, 5*time.Second)).If(cmp).Then(clientv3.OpPut(data, "x")).Commit()
		if err != nil {
			t.Fatal(err)
		}
		return resp.Succeeded
	}
	if !put() {
		t.Fatal("a guarded write failed while the lock was held")
	}
	if _, err := d.Client().Delete(ctxT(t, 5*time.Second), d.KeyRange(key), clientv3.WithPrefix()); err != nil {
		t.Fatal(err)
	}
	if put() {
		t.Fatal("a guarded write succeeded after the lock was deleted")
	}
	_ = le.Release(ctxT(t, 5*time.Second))
	if _, err := d.OwnerCmp(le.Key(), le.Token()); err == nil {
		t.Error("OwnerCmp of a released lease succeeded")
	}
	_, _ = d.Client().Delete(ctxT(t, 5*time.Second), data)
}

// testRefreshAll: a batch refresh renews every lock of the driver and
// reports ErrNotHeld only for the lock whose key is gone.
func testRefreshAll(t *testing.T, c *cluster) {
	_, d := locker(t, c.g.Addrs()...)
	ctx := ctxT(t, 30*time.Second)
	var locks []backend.Lock
	var ttls []time.Duration
	var keys []string
	for i := range 3 {
		key := fmt.Sprintf("batch-%d-%d", time.Now().UnixNano(), i)
		g, err := d.TryAcquire(ctx, backend.Request{Key: key, Owner: "o", TTL: testTTL})
		if err != nil {
			t.Fatal(err)
		}
		locks, ttls, keys = append(locks, g.Lock), append(ttls, testTTL), append(keys, key)
	}
	for i, err := range d.RefreshAll(ctx, locks, ttls) {
		if err != nil {
			t.Errorf("lock %d: %v", i, err)
		}
	}
	if _, err := d.Client().Delete(ctx, d.KeyRange(keys[1]), clientv3.WithPrefix()); err != nil {
		t.Fatal(err)
	}
	errs := d.RefreshAll(ctx, locks, ttls)
	if errs[0] != nil || errs[2] != nil || !errors.Is(errs[1], backend.ErrNotHeld) {
		t.Errorf("after deleting lock 1, RefreshAll = %v, want [nil ErrNotHeld nil]", errs)
	}
	for i, l := range locks {
		err := l.Release(ctx)
		if (i == 1) != errors.Is(err, backend.ErrNotHeld) {
			t.Errorf("release of lock %d: %v", i, err)
		}
	}
	if n := etcdlock.HeldCount(d); n != 0 {
		t.Errorf("the driver tracks %d locks after every one was released (one found gone first), want 0", n)
	}
}

// testQueueChurn: three drivers with three goroutines each take one key in
// turns, on every member of the cluster (reads, writes and watches go to
// different members). Nobody may hold the lock while another does, and
// no waiter may be left waiting (each acquisition has 15 s).
func testQueueChurn(t *testing.T, c *cluster) {
	const drivers, workers, rounds = 3, 3, 15
	key := fmt.Sprintf("churn-%d", time.Now().UnixNano())
	var inside, overlaps atomic.Int32
	var wg sync.WaitGroup
	for range drivers {
		l, _ := locker(t, c.g.Addrs()...)
		for range workers {
			wg.Go(func() {
				for range rounds {
					le, err := l.Acquire(ctxT(t, 15*time.Second), key)
					if err != nil {
						t.Errorf("Acquire: %v", err)
						return
					}
					if inside.Add(1) != 1 {
						overlaps.Add(1)
					}
					time.Sleep(time.Millisecond)
					inside.Add(-1)
					if err := le.Release(ctxT(t, 10*time.Second)); err != nil {
						t.Errorf("Release: %v", err)
						return
					}
				}
			})
		}
	}
	wg.Wait()
	if n := overlaps.Load(); n > 0 {
		t.Errorf("%d acquisitions entered while another holder was inside", n)
	}
}
