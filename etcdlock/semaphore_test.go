package etcdlock_test

import (
	"context"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"

	"github.com/distlock/distlock"
	"github.com/distlock/distlock/etcdlock"
)

// rpcCounter records the unary calls a client makes (keepalives of the
// lease are a stream and not counted).
type rpcCounter struct {
	mu    sync.Mutex
	calls []string
}

func (c *rpcCounter) intercept(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
	c.mu.Lock()
	c.calls = append(c.calls, method[strings.LastIndex(method, "/")+1:])
	c.mu.Unlock()
	return invoker(ctx, method, req, reply, cc, opts...)
}

func (c *rpcCounter) take() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := c.calls
	c.calls = nil
	return out
}

// TestSemaphoreRoundTrips counts the requests of uncontended permits
// (docs/primitives.md quotes them): an acquisition that holds is one
// transaction (put + read of the queue), a release one delete; a try
// that finds the permits taken also deletes its key again.
func TestSemaphoreRoundTrips(t *testing.T) {
	cl := startCluster(t, 1)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	rc := &rpcCounter{}
	d := cl.driverVia(t, nil, grpc.WithChainUnaryInterceptor(rc.intercept))
	l := distlock.New(d)
	defer l.Close()
	s, err := l.Semaphore("roundtrips-sem", 2)
	if err != nil {
		t.Fatal(err)
	}
	warm, err := s.Acquire(ctx) // the lease is granted once
	if err != nil {
		t.Fatal(err)
	}
	rc.take()
	for i := range 3 {
		le, err := s.TryAcquire(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if got := rc.take(); !slices.Equal(got, []string{"Txn"}) {
			t.Errorf("pair %d: acquire sent %v, want one Txn", i, got)
		}
		if _, err := s.TryAcquire(ctx); err == nil {
			t.Fatal("a third permit of 2 was granted")
		}
		if got := rc.take(); !slices.Equal(got, []string{"Txn", "DeleteRange"}) {
			t.Errorf("pair %d: a refused try sent %v, want Txn and DeleteRange", i, got)
		}
		if err := le.Release(ctx); err != nil {
			t.Fatal(err)
		}
		if got := rc.take(); !slices.Equal(got, []string{"DeleteRange"}) {
			t.Errorf("pair %d: release sent %v, want one DeleteRange", i, got)
		}
	}
	if err := warm.Release(ctx); err != nil {
		t.Fatal(err)
	}
}

// TestSemaphoreFIFO: a waiter for 2 permits is not overtaken by a later
// waiter for 1 when one permit comes free.
func TestSemaphoreFIFO(t *testing.T) {
	cl := startCluster(t, 1)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	sem := func() *distlock.Semaphore {
		c, err := cl.client(ctx)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = c.Close() })
		d, err := etcdlock.New(c, nil)
		if err != nil {
			t.Fatal(err)
		}
		l := distlock.New(d)
		t.Cleanup(func() { _ = l.Close() })
		s, err := l.Semaphore("fifo", 2)
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	a, b, c := sem(), sem(), sem()
	a1, err := a.Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	a2, err := a.Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	order := make(chan string, 2)
	var wg sync.WaitGroup
	wait := func(name string, s *distlock.Semaphore, n int) {
		wg.Go(func() {
			le, err := s.AcquireN(ctx, n)
			if err != nil {
				t.Errorf("%s: %v", name, err)
				return
			}
			order <- name
			time.Sleep(50 * time.Millisecond)
			_ = le.Release(ctx)
		})
	}
	wait("b (2 permits, first)", b, 2)
	time.Sleep(200 * time.Millisecond) // b is queued before c
	wait("c (1 permit, second)", c, 1)
	time.Sleep(200 * time.Millisecond)
	if err := a1.Release(ctx); err != nil {
		t.Fatal(err)
	}
	select {
	case who := <-order:
		t.Fatalf("%s was granted with only one permit free, ahead of the waiter before it", who)
	case <-time.After(300 * time.Millisecond):
	}
	if err := a2.Release(ctx); err != nil {
		t.Fatal(err)
	}
	wg.Wait()
	close(order)
	var got []string
	for who := range order {
		got = append(got, who)
	}
	if want := []string{"b (2 permits, first)", "c (1 permit, second)"}; !slices.Equal(got, want) {
		t.Errorf("grant order %q, want %q", got, want)
	}
}
