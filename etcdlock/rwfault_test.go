package etcdlock

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/distlock/distlock/backend"
	"github.com/distlock/distlock/sandbox"
)

// rwFaults injects transient failures into one etcd client, as a store
// gives them when a connection breaks or a member loses its leader: the
// next txns transactions fail with codes.Unavailable before being sent
// (the etcd client does not retry a failed Txn: a write's fate would be
// unknown), and the next recvs messages of a watch stream are lost and
// the stream fails with etcd's "no leader" error, which ends every watch
// of the stream (the driver's watches require a leader). hold, when set,
// holds the creation of the next watch of that key until unhold is
// closed (held is closed once it is held).
type rwFaults struct {
	mu          sync.Mutex
	txns, recvs int
	injected    int
	hold        string
	held        chan struct{}
	unhold      chan struct{}
}

// arm sets how many transactions and watch receives fail next.
func (f *rwFaults) arm(txns, recvs int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.txns, f.recvs = txns, recvs
}

// count is how many failures were injected.
func (f *rwFaults) count() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.injected
}

func (f *rwFaults) take(n *int) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	if *n <= 0 {
		return false
	}
	*n--
	f.injected++
	return true
}

func (f *rwFaults) unary(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
	if method == "/etcdserverpb.KV/Txn" && f.take(&f.txns) {
		return status.Error(codes.Unavailable, "injected: connection reset")
	}
	return invoker(ctx, method, req, reply, cc, opts...)
}

func (f *rwFaults) stream(ctx context.Context, desc *grpc.StreamDesc, cc *grpc.ClientConn, method string, streamer grpc.Streamer, opts ...grpc.CallOption) (grpc.ClientStream, error) {
	cs, err := streamer(ctx, desc, cc, method, opts...)
	if err != nil || method != "/etcdserverpb.Watch/Watch" {
		return cs, err
	}
	return &faultStream{ClientStream: cs, f: f}, nil
}

type faultStream struct {
	grpc.ClientStream
	f *rwFaults
}

func (s *faultStream) RecvMsg(m any) error {
	if err := s.ClientStream.RecvMsg(m); err != nil {
		return err
	}
	if s.f.take(&s.f.recvs) {
		return rpctypes.ErrGRPCNoLeader
	}
	return nil
}

func (s *faultStream) SendMsg(m any) error {
	if r, ok := m.(*etcdserverpb.WatchRequest); ok && r.GetCreateRequest() != nil {
		f := s.f
		f.mu.Lock()
		held, unhold := f.held, f.unhold
		hit := f.hold != "" && string(r.GetCreateRequest().Key) == f.hold
		if hit {
			f.hold = ""
		}
		f.mu.Unlock()
		if hit {
			close(held)
			<-unhold
		}
	}
	return s.ClientStream.SendMsg(m)
}

// rwFaultEnv is one etcd member, a holder's driver and a waiter's driver
// whose client fails when told (rwFaults).
type rwFaultEnv struct {
	holder, waiter *Driver
	f              *rwFaults
}

func newRWFaultEnv(t *testing.T) *rwFaultEnv {
	g := sandbox.StartT(t, sandbox.Spec{Kind: sandbox.Etcd})
	f := &rwFaults{}
	newDriver := func(opts ...grpc.DialOption) *Driver {
		return ownDrivers(t, g.Addrs(), 1, "rwfault", opts...)[0]
	}
	return &rwFaultEnv{
		holder: newDriver(),
		waiter: newDriver(grpc.WithChainUnaryInterceptor(f.unary), grpc.WithChainStreamInterceptor(f.stream)),
		f:      f,
	}
}

// rwKeys returns the keys of key's read-write queue with their create
// revisions, oldest first.
func (e *rwFaultEnv) rwKeys(t *testing.T, key string) ([]string, []int64) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	resp, err := e.holder.c.Get(ctx, rwRange(e.holder.prefix, key), clientv3.WithPrefix(),
		clientv3.WithSort(clientv3.SortByCreateRevision, clientv3.SortAscend))
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	var revs []int64
	for _, kv := range resp.Kvs {
		names, revs = append(names, string(kv.Key)), append(revs, kv.CreateRevision)
	}
	return names, revs
}

// queuedBehind waits until key's queue holds the holder's key and the
// waiter's, and returns the waiter's key and its create revision.
func (e *rwFaultEnv) queuedBehind(t *testing.T, key string) (string, int64) {
	t.Helper()
	for range 1000 {
		if names, revs := e.rwKeys(t, key); len(names) == 2 {
			return names[1], revs[1]
		}
		time.Sleep(5 * time.Millisecond)
	}
	t.Fatalf("the waiter never queued for %q", key)
	return "", 0
}

// TestRWWaitFaults: a wait for either side of a read-write lock
// survives what a mutex's wait survives. A transaction of the wait (a
// reader's read after the writer ahead left, a writer's fence put) failing
// once with codes.Unavailable, or the watch of the key it depends on
// ending with "no leader" and losing the deletion it was about to report,
// makes the waiter pause and retry with the same key: it keeps its place
// in line (its key's create revision) and holds once the holder released.
// And a wait whose ctx ends while the store keeps failing leaves no key.
//
// created-after-read: the watch of the key a waiter depends on starts
// after that key's deletion (its creation is held until then), so it
// never reports it: the waiter must see that the watch started after its
// read and read again at once, not only at its next recheck.
func TestRWWaitFaults(t *testing.T) {
	e := newRWFaultEnv(t)
	for _, mode := range []backend.Kind{backend.Read, backend.Write} {
		for _, fault := range []string{"txn", "watch"} {
			t.Run(fmt.Sprintf("%s/%s", rwSide(mode), fault), func(t *testing.T) {
				key := fmt.Sprintf("fault-%s-%s-%d", rwSide(mode), fault, time.Now().UnixNano())
				ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
				defer cancel()
				hg, err := e.holder.waitRW(ctx, backend.Request{Key: key, Owner: "holder", TTL: 10 * time.Second}, backend.Write)
				if err != nil {
					t.Fatal(err)
				}
				type result struct {
					g   backend.Grant
					err error
				}
				done := make(chan result, 1)
				go func() {
					g, err := e.waiter.waitRW(ctx, backend.Request{Key: key, Owner: "waiter", TTL: 10 * time.Second}, mode)
					done <- result{g, err}
				}()
				name, rev := e.queuedBehind(t, key)
				// Past the young watch's rechecks (recheckYoung), so that
				// the next transaction is, most likely, the one after
				// the release.
				time.Sleep(recheckYoung + 25*time.Millisecond)
				before := e.f.count()
				if fault == "txn" {
					e.f.arm(1, 0)
				} else {
					e.f.arm(0, 1)
				}
				if err := hg.Lock.Release(ctx); err != nil {
					t.Fatal(err)
				}
				var r result
				select {
				case r = <-done:
				case <-time.After(10 * time.Second):
					t.Fatal("the waiter did not hold 10 s after the holder released")
				}
				e.f.arm(0, 0)
				if n := e.f.count() - before; n != 1 {
					t.Errorf("%d failures injected, want 1", n)
				}
				if r.err != nil {
					t.Fatalf("the wait ended with %v after one transient failure", r.err)
				}
				defer r.g.Lock.Release(ctx)
				if l := r.g.Lock.(*lock); l.ekey != name || l.rev != rev {
					t.Errorf("granted with key %s (created at %d), want the key it queued with, %s (created at %d)", l.ekey, l.rev, name, rev)
				}
				if names, revs := e.rwKeys(t, key); len(names) != 1 || names[0] != name || revs[0] != rev {
					t.Errorf("queue after the grant: %v at %v, want only %s at %d", names, revs, name, rev)
				}
			})
		}
		t.Run(fmt.Sprintf("%s/ctx-ends", rwSide(mode)), func(t *testing.T) {
			key := fmt.Sprintf("fault-%s-ctx-%d", rwSide(mode), time.Now().UnixNano())
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			hg, err := e.holder.waitRW(ctx, backend.Request{Key: key, Owner: "holder", TTL: 10 * time.Second}, backend.Write)
			if err != nil {
				t.Fatal(err)
			}
			const wait = 600 * time.Millisecond
			start := time.Now()
			wctx, wcancel := context.WithTimeout(ctx, wait)
			defer wcancel()
			done := make(chan error, 1)
			go func() {
				g, err := e.waiter.waitRW(wctx, backend.Request{Key: key, Owner: "waiter", TTL: 10 * time.Second}, mode)
				if err == nil {
					_ = g.Lock.Release(ctx)
					err = errors.New("granted")
				}
				done <- err
			}()
			e.queuedBehind(t, key)
			e.f.arm(1000, 1000) // every transaction and watch fails from now on
			defer e.f.arm(0, 0)
			if err := hg.Lock.Release(ctx); err != nil {
				t.Fatal(err)
			}
			err = <-done
			if !errors.Is(err, context.DeadlineExceeded) {
				t.Errorf("the wait ended %v after its start with %v, want its ctx's deadline (%v)", time.Since(start), err, wait)
			}
			if names, _ := e.rwKeys(t, key); len(names) != 0 {
				t.Errorf("keys left after the wait ended: %v", names)
			}
		})
	}
	for _, mode := range []backend.Kind{backend.Read, backend.Write} {
		t.Run(fmt.Sprintf("created-after-read/%s", rwSide(mode)), func(t *testing.T) { testRWCreatedAfterRead(t, e, mode) })
	}
}

func testRWCreatedAfterRead(t *testing.T, e *rwFaultEnv, mode backend.Kind) {
	key := fmt.Sprintf("created-%s-%d", rwSide(mode), time.Now().UnixNano())
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	hg, err := e.holder.waitRW(ctx, backend.Request{Key: key, Owner: "holder", TTL: 10 * time.Second}, backend.Write)
	if err != nil {
		t.Fatal(err)
	}
	held, unhold := make(chan struct{}), make(chan struct{})
	e.f.mu.Lock()
	e.f.hold, e.f.held, e.f.unhold = hg.Lock.(*lock).ekey, held, unhold
	e.f.mu.Unlock()
	var mu sync.Mutex
	var steps []string
	traceHook = func(d *Driver, step string, _ int64) {
		if d == e.waiter {
			mu.Lock()
			steps = append(steps, step)
			mu.Unlock()
		}
	}
	defer func() { traceHook = nil }()
	done := make(chan error, 1)
	go func() {
		g, err := e.waiter.waitRW(ctx, backend.Request{Key: key, Owner: "waiter", TTL: 10 * time.Second}, mode)
		if err == nil {
			err = g.Lock.Release(ctx)
		}
		done <- err
	}()
	select {
	case <-held:
	case <-time.After(10 * time.Second):
		close(unhold)
		t.Fatal("the waiter never watched the holder's key")
	}
	if err := hg.Lock.Release(ctx); err != nil {
		close(unhold)
		t.Fatal(err)
	}
	close(unhold)
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the waiter did not hold 10 s after the holder released")
	}
	mu.Lock()
	defer mu.Unlock()
	if !slices.Contains(steps, "rw-created-reread") {
		t.Errorf("the waiter's steps %v hold no re-read for a watch that started after its read", steps)
	}
}
