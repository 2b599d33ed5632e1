package conformance

import (
	"context"
	"errors"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/distlock/distlock"
)

func isNotAcquired(err error) bool { return errors.Is(err, distlock.ErrNotAcquired) }

type interval struct{ start, end time.Time }

func testMutualExclusion(t *testing.T, e *env) {
	const lockers, workers, rounds = 3, 3, 6
	key := e.key("counter")
	var (
		counter int // deliberately not atomic: the lock protects it
		inside  atomic.Int32
		overlap atomic.Int32
		entered atomic.Int32 // critical sections run
		mu      sync.Mutex
		spans   []interval
		wg      sync.WaitGroup
	)
	for range lockers {
		c := e.locker(t)
		for range workers {
			wg.Go(func() {
				for range rounds {
					le, err := c.Acquire(ctxFor(t, 60*time.Second), key)
					if err != nil {
						t.Errorf("Acquire: %v", err)
						return
					}
					start := time.Now()
					entered.Add(1)
					if inside.Add(1) != 1 {
						overlap.Add(1)
					}
					v := counter
					runtime.Gosched()
					work(time.Millisecond)
					counter = v + 1
					inside.Add(-1)
					end := time.Now()
					mu.Lock()
					spans = append(spans, interval{start, end})
					mu.Unlock()
					if err := le.Release(ctxFor(t, 10*time.Second)); err != nil {
						t.Errorf("Release: %v", err)
						return
					}
				}
			})
		}
	}
	wg.Wait()
	if n := overlap.Load(); n > 0 {
		t.Errorf("%d acquisitions entered while another holder was inside", n)
	}
	if want := int(entered.Load()); counter != want {
		t.Errorf("protected counter = %d after %d critical sections: updates were lost to concurrent holders", counter, want)
	}
	slices.SortFunc(spans, func(a, b interval) int { return a.start.Compare(b.start) })
	for i := 1; i < len(spans); i++ {
		if spans[i].start.Before(spans[i-1].end) {
			t.Errorf("hold intervals overlap: [%v, %v] and [%v, ...]", spans[i-1].start.Format(time.StampMicro),
				spans[i-1].end.Format(time.StampMicro), spans[i].start.Format(time.StampMicro))
			break
		}
	}
}

func testTryAcquireOneWinner(t *testing.T, e *env) {
	const n = 5
	key := e.key("try")
	clients := make([]*client, n)
	for i := range clients {
		clients[i] = e.locker(t)
	}
	start := make(chan struct{})
	leases := make([]*distlock.Lease, n)
	errs := make([]error, n)
	took := make([]time.Duration, n)
	var wg sync.WaitGroup
	for i, c := range clients {
		wg.Go(func() {
			<-start
			t0 := time.Now()
			leases[i], errs[i] = c.TryAcquire(ctxFor(t, 30*time.Second), key)
			took[i] = time.Since(t0)
		})
	}
	close(start)
	wg.Wait()
	winners := 0
	var winner *distlock.Lease
	for i := range n {
		switch {
		case errs[i] == nil:
			winners++
			winner = leases[i]
		case !isNotAcquired(errs[i]):
			t.Errorf("loser %d: error %v does not match ErrNotAcquired", i, errs[i])
		case took[i] > e.ttl:
			t.Errorf("loser %d: TryAcquire took %v, longer than the TTL %v: it waited", i, took[i], e.ttl)
		}
	}
	if winners != 1 {
		t.Fatalf("%d TryAcquires won, want exactly 1", winners)
	}
	release(t, winner)
	// No residue: every loser left nothing queued, so the key is free for
	// each of them in turn, at once.
	for i, c := range clients {
		if !isFree(t, c, key) {
			t.Errorf("after the winner released, client %d could not take the key: a loser left something behind", i)
		}
	}
}

func testWaitDeadline(t *testing.T, e *env) {
	testWaitGivesUp(t, e, func(ctx context.Context) (context.Context, func()) {
		return context.WithTimeout(ctx, e.ttl/2)
	}, context.DeadlineExceeded)
}

func testWaitCancel(t *testing.T, e *env) {
	testWaitGivesUp(t, e, func(ctx context.Context) (context.Context, func()) {
		ctx, cancel := context.WithCancel(ctx)
		time.AfterFunc(e.ttl/2, cancel)
		return ctx, cancel
	}, context.Canceled)
}

func testWaitGivesUp(t *testing.T, e *env, mk func(context.Context) (context.Context, func()), want error) {
	key := e.key("wait")
	holder, waiter, third := e.locker(t), e.locker(t), e.locker(t)
	le := mustAcquire(t, holder, key)
	ctx, cancel := mk(context.Background())
	defer cancel()
	t0 := time.Now()
	_, err := waiter.Acquire(ctx, key)
	took := time.Since(t0)
	if err == nil {
		t.Fatal("Acquire succeeded while another Locker held the key")
	}
	if !errors.Is(err, want) {
		t.Errorf("Acquire error %v does not match %v", err, want)
	}
	// The same kinds on every store, said once: a ctx the caller
	// canceled is not an unreachable store, and the ctx's error is not
	// repeated ("context canceled (store unavailable: context canceled)").
	if want == context.Canceled && errors.Is(err, distlock.ErrUnavailable) {
		t.Errorf("Acquire error %v matches ErrUnavailable: a canceled ctx is not an unreachable store", err)
	}
	if n := strings.Count(err.Error(), want.Error()); n != 1 || strings.Contains(err.Error(), "\n") {
		t.Errorf("Acquire error %q: want one line saying %q once", err, want)
	}
	if took > e.ttl/2+2*time.Second+e.ttl {
		t.Errorf("Acquire returned %v after its ctx ended; want promptly", took-e.ttl/2)
	}
	release(t, le)
	// The abandoned waiter must not take the lock now that it is free.
	if !isFree(t, third, key) {
		t.Error("after the holder released, the key was not free: the canceled waiter took it or left its place in line")
	}
	freeThroughout(t, third, key, e.ttl/4, "a canceled waiter took the lock after giving up")
}

func testWaitThenAcquire(t *testing.T, e *env) {
	key := e.key("handoff")
	holder, waiter := e.locker(t), e.locker(t)
	le := mustAcquire(t, holder, key, distlock.WithTTL(4*e.ttl))
	got := make(chan error, 1)
	go func() {
		le2, err := waiter.Acquire(ctxFor(t, 30*time.Second), key)
		if err == nil {
			err = le2.Release(ctxFor(t, 10*time.Second))
		}
		got <- err
	}()
	e.inLine(t, waiter, 1, holder.d, Mutex, key, 1)
	released := time.Now()
	release(t, le)
	select {
	case err := <-got:
		if err != nil {
			t.Fatalf("waiter: %v", err)
		}
		if took := time.Since(released); took > 2*e.ttl {
			t.Errorf("waiter got the lock %v after the release; want well before the holder's TTL (%v)", took, 4*e.ttl)
		}
	case <-time.After(4 * e.ttl):
		t.Fatal("waiter did not get the lock after the holder released it")
	}
}
