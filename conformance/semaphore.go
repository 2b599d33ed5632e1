package conformance

import (
	"context"
	"errors"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/distlock/distlock"
	"github.com/distlock/distlock/backend"
)

// Cases for counting semaphores (Locker.Semaphore), run on every store
// whose driver grants them (backend.Permits) and skipped elsewhere.

// semaphore makes a semaphore on c, or skips the case where the store
// offers none.
func semaphore(t *testing.T, c *client, key string, limit int) *distlock.Semaphore {
	t.Helper()
	if c.Capabilities().Semaphore == "" {
		t.Skipf("the %s backend offers no semaphore", c.Capabilities().Name)
	}
	s, err := c.Semaphore(key, limit)
	if err != nil {
		t.Fatalf("Semaphore(%q, %d): %v", key, limit, err)
	}
	return s
}

func testSemaphoreLimit(t *testing.T, e *env) {
	const limit, lockers, workers, rounds = 3, 3, 3, 5
	key := e.key("limit")
	var inside, most atomic.Int32
	var wg sync.WaitGroup
	for range lockers {
		s := semaphore(t, e.locker(t), key, limit)
		for range workers {
			wg.Go(func() {
				for range rounds {
					n := 1 + rand.IntN(2)
					le, err := s.AcquireN(ctxFor(t, 30*time.Second), n)
					if err != nil {
						t.Errorf("AcquireN(%d): %v", n, err)
						return
					}
					now := inside.Add(int32(n))
					if now > limit {
						t.Errorf("%d permits held at once, limit %d", now, limit)
					}
					for m := most.Load(); now > m && !most.CompareAndSwap(m, now); m = most.Load() {
					}
					work(time.Duration(1+rand.IntN(3)) * time.Millisecond)
					inside.Add(-int32(n))
					if err := le.Release(ctxFor(t, 10*time.Second)); err != nil {
						t.Errorf("Release: %v", err)
						return
					}
				}
			})
		}
	}
	wg.Wait()
	t.Logf("at most %d of %d permits were held at once", most.Load(), limit)
}

func testSemaphoreTryFull(t *testing.T, e *env) {
	key := e.key("full")
	a, b := e.locker(t), e.locker(t)
	sa, sb := semaphore(t, a, key, 3), semaphore(t, b, key, 3)
	p1, err := sa.TryAcquireN(ctxFor(t, 10*time.Second), 2)
	if err != nil {
		t.Fatalf("TryAcquireN(2) of a free semaphore of 3: %v", err)
	}
	if p1.Permits() != 2 {
		t.Errorf("Permits() = %d, want 2", p1.Permits())
	}
	if _, err := sb.TryAcquireN(ctxFor(t, 10*time.Second), 2); !isNotAcquired(err) {
		t.Fatalf("TryAcquireN(2) with 1 of 3 permits free: %v, want ErrNotAcquired", err)
	}
	p2, err := sb.TryAcquire(ctxFor(t, 10*time.Second))
	if err != nil {
		t.Fatalf("TryAcquire with 1 of 3 permits free (a failed try must take none): %v", err)
	}
	if _, err := sa.TryAcquire(ctxFor(t, 10*time.Second)); !isNotAcquired(err) {
		t.Fatalf("TryAcquire of a full semaphore: %v, want ErrNotAcquired", err)
	}
	if !isFree(t, b, key) {
		t.Error("the lock named like a full semaphore is held: they must be independent")
	}
	release(t, p1)
	p3, err := sb.TryAcquireN(ctxFor(t, 10*time.Second), 2)
	if err != nil {
		t.Fatalf("TryAcquireN(2) after a release of 2 permits: %v", err)
	}
	if _, err := sa.TryAcquire(ctxFor(t, 10*time.Second)); !isNotAcquired(err) {
		t.Fatalf("TryAcquire after the release's permits were taken again: %v, want ErrNotAcquired", err)
	}
	release(t, p2)
	release(t, p3)
	p4, err := sa.TryAcquireN(ctxFor(t, 10*time.Second), 3)
	if err != nil {
		t.Fatalf("TryAcquireN(3) once every permit was released: %v", err)
	}
	release(t, p4)
}

func testSemaphoreTokens(t *testing.T, e *env) {
	key := e.key("tokens")
	a, b := e.locker(t), e.locker(t)
	sems := []*distlock.Semaphore{semaphore(t, a, key, 2), semaphore(t, b, key, 2)}
	var last uint64
	check := func(what string, le *distlock.Lease) {
		t.Helper()
		if le.Token() <= last {
			t.Errorf("%s: token %d is not above the previous grant's %d", what, le.Token(), last)
		}
		last = le.Token()
	}
	var held []*distlock.Lease
	for i := range 6 {
		le, err := sems[i%2].Acquire(ctxFor(t, 30*time.Second))
		if err != nil {
			t.Fatalf("Acquire %d: %v", i, err)
		}
		check("grant while another permit is held", le)
		held = append(held, le)
		if len(held) == 2 {
			release(t, held[0])
			held = held[1:]
		}
	}
	release(t, held[0])
	le, err := sems[0].Acquire(ctxFor(t, 30*time.Second), distlock.WithoutAutoRenew())
	if err != nil {
		t.Fatalf("Acquire without renewal: %v", err)
	}
	check("grant without renewal", le)
	if !waitDone(le, 2*e.ttl+5*time.Second) {
		t.Fatal("a permit without auto-renewal did not end after its TTL")
	}
	for range 2 {
		le, err := sems[1].AcquireN(ctxFor(t, 30*time.Second), 2)
		if err != nil {
			t.Fatalf("AcquireN(2) after expiry: %v", err)
		}
		check("grant after expiry", le)
		release(t, le)
	}
}

func testSemaphoreCrashedHolder(t *testing.T, e *env) {
	key := e.key("crash")
	a, b := e.locker(t), e.locker(t)
	sa, sb := semaphore(t, a, key, 2), semaphore(t, b, key, 2)
	le, err := sa.AcquireN(ctxFor(t, 30*time.Second), 2)
	if err != nil {
		t.Fatalf("AcquireN(2): %v", err)
	}
	if err := e.h.Kill(ctxFor(t, 10*time.Second), a.d); err != nil {
		t.Fatalf("harness Kill: %v", err)
	}
	lb, err := sb.AcquireN(ctxFor(t, 4*e.ttl+10*time.Second), 2)
	gotAt := time.Now()
	if err != nil {
		t.Fatalf("the crashed holder's permits never returned: %v", err)
	}
	defer release(t, lb)
	if a.Capabilities().Lifetime == backend.LifetimeConnection {
		return
	}
	if dl := le.Deadline(); !dl.Before(gotAt) {
		t.Errorf("the crashed holder's permits were valid until %v, but another client held them at %v",
			dl.Format(time.StampMicro), gotAt.Format(time.StampMicro))
	}
	if !waitDone(le, 2*e.ttl) {
		t.Fatal("the crashed holder's permits were never reported lost")
	}
	if !errors.Is(le.Err(), distlock.ErrLost) {
		t.Errorf("crashed holder's Err() = %v, want ErrLost", le.Err())
	}
}

func testSemaphoreWaitCancel(t *testing.T, e *env) {
	key := e.key("wait")
	a, b := e.locker(t), e.locker(t)
	sa, sb := semaphore(t, a, key, 1), semaphore(t, b, key, 1)
	holder, err := sa.Acquire(ctxFor(t, 30*time.Second))
	if err != nil {
		t.Fatalf("Acquire: %v", err)
	}
	got := make(chan *distlock.Lease, 1)
	go func() {
		le, err := sb.Acquire(ctxFor(t, 30*time.Second))
		if err != nil {
			t.Errorf("waiter: %v", err)
		}
		got <- le
	}()
	e.inLine(t, b, 1, a.d, SemaphoreGrant, key, 1)
	release(t, holder)
	select {
	case le := <-got:
		if le == nil {
			return
		}
		release(t, le)
	case <-time.After(e.ttl + 5*time.Second):
		t.Fatal("a waiter did not get the permit soon after its release")
	}

	holder, err = sa.Acquire(ctxFor(t, 30*time.Second))
	if err != nil {
		t.Fatalf("Acquire: %v", err)
	}
	for _, d := range []time.Duration{time.Millisecond, e.ttl / 3} {
		start := time.Now()
		_, err := sb.Acquire(ctxFor(t, d))
		if !errors.Is(err, context.DeadlineExceeded) {
			t.Errorf("a wait of %v on a full semaphore: %v, want the ctx's deadline", d, err)
		}
		if took := time.Since(start); took > d+5*time.Second {
			t.Errorf("a wait of %v took %v to return", d, took)
		}
	}
	release(t, holder)
	le, err := sa.TryAcquire(ctxFor(t, 10*time.Second))
	if err != nil {
		t.Fatalf("TryAcquire once the holder released and every waiter gave up (did a waiter leave a permit or a place behind?): %v", err)
	}
	release(t, le)
}

// testSemaphoreLimitChange: the limit is the acquirer's. After it is
// lowered, no one is admitted until the permits held fit the new limit,
// and the holders above it keep theirs; a raised limit admits at once.
func testSemaphoreLimitChange(t *testing.T, e *env) {
	key := e.key("change")
	a, b := e.locker(t), e.locker(t)
	s3, s2, s5 := semaphore(t, a, key, 3), semaphore(t, b, key, 2), semaphore(t, b, key, 5)
	var held []*distlock.Lease
	for range 3 {
		le, err := s3.TryAcquire(ctxFor(t, 10*time.Second))
		if err != nil {
			t.Fatalf("TryAcquire of a semaphore of 3: %v", err)
		}
		held = append(held, le)
	}
	try2 := func(what string, want bool) {
		t.Helper()
		le, err := s2.TryAcquire(ctxFor(t, 10*time.Second))
		switch {
		case want && err != nil:
			t.Fatalf("limit lowered to 2, %s: %v, want a permit", what, err)
		case !want && !isNotAcquired(err):
			t.Fatalf("limit lowered to 2, %s: %v, want ErrNotAcquired", what, err)
		case want:
			release(t, le)
		}
	}
	try2("3 permits held", false)
	release(t, held[0])
	try2("2 permits held", false)
	release(t, held[1])
	try2("1 permit held", true)
	if err := held[2].Err(); err != nil {
		t.Fatalf("a holder admitted under the old limit lost its permit: %v", err)
	}
	le, err := s5.TryAcquireN(ctxFor(t, 10*time.Second), 4)
	if err != nil {
		t.Fatalf("limit raised to 5 with 1 permit held, TryAcquireN(4): %v", err)
	}
	release(t, le)
	release(t, held[2])
}
