package conformance

import (
	"context"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/distlock/distlock"
)

// testSemaphoreMixedLimits: a grant never puts more permits in use than
// the asker's own limit, even when an asker with a larger limit came in
// while it waited (whether that asker got its permit at once, on stores
// that are not fair, or queued behind the waiter, on fair ones).
func testSemaphoreMixedLimits(t *testing.T, e *env) {
	key := e.key("mixed")
	a, b, c := e.locker(t), e.locker(t), e.locker(t)
	sa, sb, sc := semaphore(t, a, key, 2), semaphore(t, b, key, 2), semaphore(t, c, key, 5)
	held, err := sa.AcquireN(ctxFor(t, 10*time.Second), 2)
	if err != nil {
		t.Fatalf("AcquireN(2) of a free semaphore of 2: %v", err)
	}
	got := make(chan *distlock.Lease, 1)
	go func() {
		le, err := sb.AcquireN(ctxFor(t, 60*time.Second), 2)
		if err != nil {
			t.Errorf("waiter for 2 permits of 2: %v", err)
		}
		got <- le
	}()
	e.inLine(t, b, 1, a.d, SemaphoreGrant, key, 1)
	other, err := sc.TryAcquire(ctxFor(t, 10*time.Second))
	if err != nil && !isNotAcquired(err) {
		t.Fatalf("TryAcquire under a limit of 5 with 2 permits held: %v", err)
	}
	release(t, held)
	if other != nil {
		select {
		case le := <-got:
			t.Errorf("a waiter for 2 permits under a limit of 2 was granted while another client held 1: 3 permits in use")
			if le != nil {
				release(t, le)
			}
			release(t, other)
			return
		case <-time.After(max(e.ttl/4, 500*time.Millisecond)):
		}
		release(t, other)
	}
	select {
	case le := <-got:
		if le != nil {
			release(t, le)
		}
	case <-time.After(e.ttl + 10*time.Second):
		t.Fatal("the waiter for 2 permits was not served once every permit was free")
	}
}

// testSemaphoreFIFO: on stores that declare Capabilities.SemaphoreFair, a
// waiter for many permits is not overtaken by a later waiter for fewer.
func testSemaphoreFIFO(t *testing.T, e *env) {
	key := e.key("fifo")
	a := e.locker(t)
	if c := a.Capabilities(); !c.SemaphoreFair {
		t.Skipf("%s does not declare its semaphore fair (Capabilities.SemaphoreFair is false)", c.Name)
	}
	sa := semaphore(t, a, key, 2)
	h1, err := sa.Acquire(ctxFor(t, 10*time.Second))
	if err != nil {
		t.Fatalf("Acquire: %v", err)
	}
	h2, err := sa.Acquire(ctxFor(t, 10*time.Second))
	if err != nil {
		t.Fatalf("Acquire: %v", err)
	}
	order := make(chan int, 2)
	// The waiters end (their ctx is canceled, their grants released)
	// before the test does, even when it fails early: no goroutine
	// reports into a finished test.
	wctx, stop := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	defer wg.Wait()
	defer stop()
	for i, n := range []int{2, 1} { // first a waiter for 2, then one for 1
		c := e.locker(t)
		s := semaphore(t, c, key, 2)
		wg.Add(1)
		go func() {
			defer wg.Done()
			ctx, cancel := context.WithTimeout(wctx, 60*time.Second)
			defer cancel()
			le, err := s.AcquireN(ctx, n)
			if err != nil {
				if wctx.Err() == nil {
					t.Errorf("waiter %d for %d permits: %v", i, n, err)
				}
				order <- -1
				return
			}
			order <- i
			_ = le.Release(ctxFor(t, 10*time.Second))
		}()
		// The next waiter starts once this one is in line.
		e.inOrder(t, c, a.d, SemaphoreGrant, key, i+1, max(e.ttl/8, 200*time.Millisecond))
	}
	release(t, h1)
	// A window, not a synchronisation: the time an unfair grant of the
	// free permit to the later waiter gets to show.
	select {
	case i := <-order:
		t.Fatalf("waiter %d was granted with one permit free, ahead of the waiter for 2 that came first", i)
	case <-time.After(max(e.ttl/8, 200*time.Millisecond)):
	}
	release(t, h2)
	var got []int
	for range 2 {
		select {
		case i := <-order:
			got = append(got, i)
		case <-time.After(e.ttl + 30*time.Second):
			t.Fatalf("only %v of 2 waiters were served", got)
		}
	}
	if want := []int{0, 1}; !slices.Equal(got, want) {
		t.Errorf("waiters were granted in the order %v, want %v", got, want)
	}
}
