package etcdlock_test

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"google.golang.org/grpc"

	"github.com/distlock/distlock/backend"
	"github.com/distlock/distlock/etcdlock"
)

// TestLoad: the driver's lease and key checks under a loaded server (issue
// #17, scale). Deterministic: the slowness is injected in the client's
// gRPC calls, and what is checked is counted, not timed.
func TestLoad(t *testing.T) {
	c := startCluster(t, 1)
	t.Run("SlowKeepalive", func(t *testing.T) { testSlowKeepalive(t, c, 0) })
	t.Run("SlowKeepaliveSlowDoubt", func(t *testing.T) { testSlowKeepalive(t, c, testTTL) })
	t.Run("CheckKeysInParallel", func(t *testing.T) { testCheckKeysInParallel(t, c) })
}

// slowKeepalive delays the answer of every lease keepalive by delay while
// on is set: a server that is alive but answers late (keepalives queued
// behind writes).
type slowKeepalive struct {
	on    atomic.Bool
	delay time.Duration
	sent  atomic.Int64
}

func (s *slowKeepalive) intercept(ctx context.Context, desc *grpc.StreamDesc, cc *grpc.ClientConn, method string, streamer grpc.Streamer, opts ...grpc.CallOption) (grpc.ClientStream, error) {
	cs, err := streamer(ctx, desc, cc, method, opts...)
	if err != nil || method != "/etcdserverpb.Lease/LeaseKeepAlive" || !s.on.Load() {
		return cs, err
	}
	s.sent.Add(1)
	return &delayedStream{ClientStream: cs, delay: s.delay}, nil
}

type delayedStream struct {
	grpc.ClientStream
	delay time.Duration
}

func (s *delayedStream) RecvMsg(m any) error {
	t := time.NewTimer(s.delay)
	defer t.Stop()
	select {
	case <-t.C:
	case <-s.Context().Done():
		return s.Context().Err()
	}
	return s.ClientStream.RecvMsg(m)
}

// testSlowKeepalive: every keepalive answers after 0.4 TTL, later than
// the sixth of the TTL after which a renewal counts as unanswered (and
// the locks go in doubt) but within the lease's validity. The driver's
// session must live: a slow but alive server keeps it, and the lock is
// never reported lost. The old keepalive gave each request TTL/6 and then
// sent another, so none was ever answered in time and the session was
// lost after one TTL. Driver level: no Locker, whose watchdog would send
// keepalives of its own (RefreshAll).
//
// With blockDoubt, the first OnDoubt takes that long (a whole TTL), as
// pushing doubt to 80k locks did (6.5 s): the keepalives must go on
// meanwhile. When the keepalive's goroutine pushed the doubt itself, it
// renewed nothing for that long and lost the session.
func testSlowKeepalive(t *testing.T, c *cluster, blockDoubt time.Duration) {
	slow := &slowKeepalive{delay: testTTL * 4 / 10}
	d := c.driverVia(t, &etcdlock.Options{Prefix: faultPrefix, TTL: testTTL}, grpc.WithChainStreamInterceptor(slow.intercept))
	defer d.Close()
	key := fmt.Sprintf("slowka-%d", time.Now().UnixNano())
	lost := make(chan error, 1)
	var doubts, restores atomic.Int64
	g, err := d.TryAcquire(ctxT(t, 10*time.Second), backend.Request{
		Key: key, Owner: "o", TTL: testTTL,
		OnLost: func(err error) { lost <- err },
		OnDoubt: func(error, time.Time) {
			if doubts.Add(1) == 1 {
				time.Sleep(blockDoubt)
			}
		},
		OnRestored: func() { restores.Add(1) },
	})
	if err != nil {
		t.Fatal(err)
	}
	slow.on.Store(true)
	const watch = 3 * testTTL
	select {
	case err := <-lost:
		t.Fatalf("lost under keepalives answered after %v with a %v TTL: %v", slow.delay, testTTL, err)
	case <-time.After(watch):
	}
	slow.on.Store(false)
	if n := slow.sent.Load(); n < 4 {
		t.Fatalf("only %d keepalives sent in %v: the test did not exercise the keepalive", n, watch)
	}
	// The lease is really alive on the server: the key still exists.
	resp, err := d.Client().Get(ctxT(t, 5*time.Second), d.KeyRange(key), clientv3.WithPrefix(), clientv3.WithCountOnly())
	if err != nil || resp.Count != 1 {
		t.Fatalf("the lock's key after %v of slow keepalives: %v, %v; want 1 key", watch, resp, err)
	}
	if err := g.Lock.Release(ctxT(t, 5*time.Second)); err != nil {
		t.Fatal(err)
	}
	t.Logf("%d keepalives sent in %v, each answered after %v; lease kept (%d doubts pushed, %d restored)",
		slow.sent.Load(), watch, slow.delay, doubts.Load(), restores.Load())
}

// txnGate counts the key-check transactions in flight. While on, each
// waits (at most a second) for want transactions to be in flight, so a
// driver that sends them one after another is caught by its maximum of 1.
type txnGate struct {
	on   atomic.Bool
	want int64

	mu       sync.Mutex
	cond     *sync.Cond
	inFlight int64
	maxSeen  int64
	calls    int64
}

func (g *txnGate) intercept(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
	if method != "/etcdserverpb.KV/Txn" || !g.on.Load() {
		return invoker(ctx, method, req, reply, cc, opts...)
	}
	g.mu.Lock()
	g.calls++
	g.inFlight++
	g.maxSeen = max(g.maxSeen, g.inFlight)
	g.cond.Broadcast()
	deadline := time.Now().Add(time.Second)
	wake := time.AfterFunc(time.Second, func() {
		g.mu.Lock()
		g.cond.Broadcast()
		g.mu.Unlock()
	})
	for g.inFlight < g.want && g.maxSeen < g.want && time.Now().Before(deadline) {
		g.cond.Wait()
	}
	wake.Stop()
	g.mu.Unlock()
	err := invoker(ctx, method, req, reply, cc, opts...)
	g.mu.Lock()
	g.inFlight--
	g.mu.Unlock()
	return err
}

// testCheckKeysInParallel: a RefreshAll of 300 locks checks their keys
// in 3 transactions of 100 reads, all 3 in flight at once. The old driver
// sent them one after another (at most 1 in flight), so a round of 100k
// leases was 1,000 sequential round trips.
func testCheckKeysInParallel(t *testing.T, c *cluster) {
	const n, txns = 300, 3
	g := &txnGate{want: txns}
	g.cond = sync.NewCond(&g.mu)
	d := c.driverVia(t, &etcdlock.Options{Prefix: faultPrefix, TTL: testTTL}, grpc.WithChainUnaryInterceptor(g.intercept))
	defer d.Close()
	ctx := ctxT(t, time.Minute)
	locks := make([]backend.Lock, n)
	ttls := make([]time.Duration, n)
	base := fmt.Sprintf("checkpar-%d", time.Now().UnixNano())
	for i := range n {
		gr, err := d.TryAcquire(ctx, backend.Request{Key: fmt.Sprintf("%s-%d", base, i), Owner: "o", TTL: testTTL})
		if err != nil {
			t.Fatal(err)
		}
		locks[i], ttls[i] = gr.Lock, testTTL
	}
	// Lock 150 found gone: its error must land on it, in the second
	// transaction, and nowhere else.
	if err := locks[150].Release(ctx); err != nil {
		t.Fatal(err)
	}
	g.on.Store(true)
	errs := d.RefreshAll(ctx, locks, ttls)
	g.on.Store(false)
	for i, err := range errs {
		if (i == 150) != (err != nil) {
			t.Errorf("lock %d: %v", i, err)
		}
	}
	g.mu.Lock()
	calls, maxSeen := g.calls, g.maxSeen
	g.mu.Unlock()
	if calls != txns {
		t.Errorf("%d key-check transactions for %d locks, want %d (100 reads each)", calls, n, txns)
	}
	if maxSeen != txns {
		t.Errorf("at most %d key-check transactions in flight at once, want %d: the checks went one after another", maxSeen, txns)
	}
	for i, l := range locks {
		if i != 150 {
			_ = l.Release(ctx)
		}
	}
}
