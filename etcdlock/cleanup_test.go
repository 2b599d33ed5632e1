package etcdlock_test

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	clientv3 "go.etcd.io/etcd/client/v3"
	"google.golang.org/grpc"

	"github.com/distlock/distlock"
	"github.com/distlock/distlock/etcdlock"
)

// lateTxn delays, while on, every transaction that puts a key: the caller
// whose ctx ends meanwhile gets its ctx's error at once, but the request
// still reaches the server, lateBy later, as one already on the wire does.
type lateTxn struct {
	on     atomic.Bool
	lateBy time.Duration
}

func (l *lateTxn) intercept(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
	tr, ok := req.(*pb.TxnRequest)
	if !ok || !l.on.Load() || !strings.HasSuffix(method, "/Txn") || !putsKey(tr) {
		return invoker(ctx, method, req, reply, cc, opts...)
	}
	done := make(chan error, 1)
	go func() {
		time.Sleep(l.lateBy)
		done <- invoker(context.WithoutCancel(ctx), method, req, reply, cc, opts...)
	}()
	select {
	case err := <-done:
		return err
	case <-ctx.Done():
		return ctx.Err()
	}
}

// putsKey reports whether tr (or a transaction nested in it) puts a key
// other than a tombstone (the cleanup of a put whose fate is unknown,
// which must not be held up with the puts it guards against).
func putsKey(tr *pb.TxnRequest) bool {
	for _, op := range append(tr.Success, tr.Failure...) {
		if p := op.GetRequestPut(); p != nil && !strings.Contains(string(p.Key), "/tomb/") {
			return true
		}
		if nested := op.GetRequestTxn(); nested != nil && putsKey(nested) {
			return true
		}
	}
	return false
}

// lateLocker starts a one-member cluster and returns a context of a
// minute, another client of the cluster, and a Locker whose driver (with
// prefix) sends its calls through lt; all closed when t ends.
func lateLocker(t *testing.T, lt *lateTxn, prefix string) (context.Context, *clientv3.Client, *distlock.Locker) {
	t.Helper()
	cl := startCluster(t, 1)
	ctx := ctxT(t, time.Minute)
	other, err := cl.client(ctx)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = other.Close() })
	d := cl.driverVia(t, &etcdlock.Options{Prefix: prefix}, grpc.WithChainUnaryInterceptor(lt.intercept))
	l := distlock.New(d)
	t.Cleanup(func() { _ = l.Close() })
	return ctx, other, l
}

// TestCanceledPutLeavesNoKey: an acquisition whose ctx ends while its put
// is on the way to the server must not leave that key behind once the put
// lands. The old code deleted the key at once when its put failed with the
// ctx's error; the put, still in flight, then created the key after the
// deletion: a ghost waiter (or holder) that the driver's lease kept alive
// for the driver's whole life, so the lock or semaphore never came free
// (conformance SemaphoreWaitCancel failed so on a 3-member cluster).
func TestCanceledPutLeavesNoKey(t *testing.T) {
	lt := &lateTxn{lateBy: 150 * time.Millisecond}
	ctx, other, l := lateLocker(t, lt, "ghost/")
	sem, err := l.Semaphore("sem", 1)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name    string
		acquire func(context.Context) (*distlock.Lease, error)
	}{
		{"lock-wait", func(ctx context.Context) (*distlock.Lease, error) { return l.Acquire(ctx, "mutex") }},
		{"lock-try", func(ctx context.Context) (*distlock.Lease, error) { return l.TryAcquire(ctx, "mutex2") }},
		{"semaphore-wait", func(ctx context.Context) (*distlock.Lease, error) { return sem.Acquire(ctx) }},
		{"semaphore-try", func(ctx context.Context) (*distlock.Lease, error) { return sem.TryAcquire(ctx) }},
	} {
		t.Run(c.name, func(t *testing.T) {
			lt.on.Store(true)
			actx, acancel := context.WithTimeout(ctx, 20*time.Millisecond)
			le, err := c.acquire(actx)
			acancel()
			lt.on.Store(false)
			if err == nil {
				_ = le.Release(ctx)
				t.Fatal("acquired although its put came after its ctx's end")
			}
			if !errors.Is(err, context.DeadlineExceeded) {
				t.Logf("attempt: %v", err)
			}
			time.Sleep(3 * lt.lateBy) // the late put lands
			resp, err := other.Get(ctx, "ghost/", clientv3.WithPrefix(), clientv3.WithKeysOnly())
			if err != nil {
				t.Fatal(err)
			}
			for _, kv := range resp.Kvs {
				t.Errorf("key %s left behind by an attempt whose ctx ended", kv.Key)
				_, _ = other.Delete(ctx, string(kv.Key))
			}
		})
	}
}

// TestLatePutLeavesNoKey: an acquisition's put whose answer has not come
// within the driver's 2 s bound has an unknown fate: it may still be held
// up (a connection, a member, a leader election) and land at any time. The
// cleanup must leave no key behind even when the put lands after it. The
// old code deleted the key and hoped: the put, landing later, created a
// key that the driver's lease kept alive for the driver's whole life, a
// ghost holder or waiter that no one could remove but the driver's Close.
// Now the cleanup buries the name (a tombstone every put requires absent).
func TestLatePutLeavesNoKey(t *testing.T) {
	lt := &lateTxn{lateBy: 2500 * time.Millisecond} // past the driver's 2 s
	ctx, other, l := lateLocker(t, lt, "late/")
	sem, err := l.Semaphore("sem", 1)
	if err != nil {
		t.Fatal(err)
	}
	sem2, err := l.Semaphore("sem2", 1)
	if err != nil {
		t.Fatal(err)
	}
	rw, err := l.RWMutex("rw")
	if err != nil {
		t.Fatal(err)
	}
	rw2, err := l.RWMutex("rw2")
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name    string
		acquire func(context.Context) (*distlock.Lease, error)
	}{
		{"lock-wait", func(ctx context.Context) (*distlock.Lease, error) { return l.Acquire(ctx, "mutex") }},
		{"lock-try", func(ctx context.Context) (*distlock.Lease, error) { return l.TryAcquire(ctx, "mutex2") }},
		{"semaphore-wait", func(ctx context.Context) (*distlock.Lease, error) { return sem.Acquire(ctx) }},
		{"semaphore-try", func(ctx context.Context) (*distlock.Lease, error) { return sem2.TryAcquire(ctx) }},
		{"rw-read-wait", func(ctx context.Context) (*distlock.Lease, error) { return rw.RLock(ctx) }},
		{"rw-write-try", func(ctx context.Context) (*distlock.Lease, error) { return rw2.TryLock(ctx) }},
	}
	lt.on.Store(true)
	t.Run("group", func(t *testing.T) {
		for _, c := range cases {
			t.Run(c.name, func(t *testing.T) {
				t.Parallel()
				actx, acancel := context.WithTimeout(ctx, 20*time.Millisecond)
				le, err := c.acquire(actx)
				acancel()
				if err == nil {
					_ = le.Release(ctx)
					t.Error("acquired although its put came after its ctx's end")
				}
			})
		}
	})
	// Every attempt has given up (after the driver's 2 s); the late puts
	// land 2.5 s after they were sent.
	time.Sleep(time.Second)
	lt.on.Store(false)
	resp, err := other.Get(ctx, "late/", clientv3.WithPrefix(), clientv3.WithKeysOnly())
	if err != nil {
		t.Fatal(err)
	}
	tombs := 0
	for _, kv := range resp.Kvs {
		if strings.HasPrefix(string(kv.Key), "late/tomb/") {
			tombs++
			continue
		}
		t.Errorf("key %s left behind by an attempt whose put landed late", kv.Key)
	}
	if tombs == 0 {
		t.Error("no tombstone: no cleanup met a put of unknown fate, so the test shows nothing")
	}
	// Every key is free for another driver.
	d2, err := etcdlock.New(other, &etcdlock.Options{Prefix: "late/"})
	if err != nil {
		t.Fatal(err)
	}
	l2 := distlock.New(d2)
	defer l2.Close()
	tctx, tcancel := context.WithTimeout(ctx, 5*time.Second)
	defer tcancel()
	for _, k := range []string{"mutex", "mutex2"} {
		le, err := l2.TryAcquire(tctx, k)
		if err != nil {
			t.Errorf("%s after the late put: %v", k, err)
			continue
		}
		_ = le.Release(ctx)
	}
}
