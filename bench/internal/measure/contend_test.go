package measure

import (
	"context"
	"errors"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// fakeLock is an in-process lock: a one-slot channel, so that a wait
// can end with its context.
type fakeLock struct {
	slot     chan struct{}
	acquires atomic.Int64
	made     atomic.Int64
	closed   atomic.Int64
}

func newFakeLock() *fakeLock { return &fakeLock{slot: make(chan struct{}, 1)} }

func (l *fakeLock) Acquire(ctx context.Context, _ string) (func(context.Context) error, error) {
	l.acquires.Add(1)
	select {
	case l.slot <- struct{}{}:
		return func(context.Context) error { <-l.slot; return nil }, nil
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// closer counts the contenders closed.
type closer struct {
	AcquireFunc
	l *fakeLock
}

func (c closer) Close() { c.l.closed.Add(1) }

func (l *fakeLock) library(name string) Library {
	return Library{Name: name, Make: func() (Contender, error) {
		l.made.Add(1)
		return closer{AcquireFunc(l.Acquire), l}, nil
	}}
}

func TestContendFakeLock(t *testing.T) {
	l := newFakeLock()
	c, err := Contend(context.Background(), l.library("fake"), Run{Key: "k", Workers: 4, For: 200 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	if l.made.Load() != 4 || l.closed.Load() != 4 {
		t.Errorf("made %d contenders and closed %d, want 4 and 4", l.made.Load(), l.closed.Load())
	}
	if c.Overlaps != 0 {
		t.Errorf("%d overlaps on an exclusive lock", c.Overlaps)
	}
	if c.Acquisitions < 100 || len(c.Counts) != 4 || len(c.Waits) != 4 {
		t.Fatalf("%d acquisitions over %d workers", c.Acquisitions, len(c.Counts))
	}
	sum, waits := 0, 0
	for w := range c.Counts {
		sum += c.Counts[w]
		waits += len(c.Waits[w])
	}
	if sum != c.Acquisitions || waits != c.Acquisitions || len(c.Releases) != c.Acquisitions {
		t.Errorf("counts add up to %d, waits %d, releases %d; acquisitions %d", sum, waits, len(c.Releases), c.Acquisitions)
	}
	if len(c.Handoffs) > c.Acquisitions-1 {
		t.Errorf("%d hand-offs for %d grants", len(c.Handoffs), c.Acquisitions)
	}
	if c.Duration < 200*time.Millisecond || c.Duration > 200*time.Millisecond+Grace {
		t.Errorf("Duration = %v", c.Duration)
	}
	if s := c.Shares(); len(s) != 4 || c.MaxShare() < 1 {
		t.Errorf("shares %v, max share %v", s, c.MaxShare())
	}
}

// A lock held from outside for the whole run: every worker's one wait is
// cut off by the end and counts as long as it lasted, without an error.
func TestContendCutWaits(t *testing.T) {
	l := newFakeLock()
	l.slot <- struct{}{}
	c, err := Contend(context.Background(), l.library("held"), Run{Key: "k", Workers: 2, For: 50 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	if c.Acquisitions != 0 || len(c.Handoffs) != 0 {
		t.Errorf("%d acquisitions, %d hand-offs on a lock never free", c.Acquisitions, len(c.Handoffs))
	}
	for w, ws := range c.Waits {
		if len(ws) != 1 || ws[0] < 50*time.Millisecond+Grace {
			t.Errorf("worker %d waits %v, want one of at least %v", w, ws, 50*time.Millisecond+Grace)
		}
	}
}

func TestContendErrors(t *testing.T) {
	boom := errors.New("boom")
	failing := Library{Name: "failing", Make: func() (Contender, error) {
		return AcquireFunc(func(context.Context, string) (func(context.Context) error, error) { return nil, boom }), nil
	}}
	if _, err := Contend(context.Background(), failing, Run{Key: "k", Workers: 2, For: time.Second}); !errors.Is(err, boom) {
		t.Errorf("Contend over a failing acquire = %v, want boom", err)
	}
	cantMake := Library{Name: "x", Make: func() (Contender, error) { return nil, boom }}
	if _, err := Contend(context.Background(), cantMake, Run{Key: "k", Workers: 2, For: time.Second}); !errors.Is(err, boom) {
		t.Errorf("Contend with a failing Make = %v, want boom", err)
	}
	if _, err := Contend(context.Background(), newFakeLock().library("f"), Run{Workers: 1}); err == nil {
		t.Error("Contend without a key did not fail")
	}
}

func TestContendWarmUp(t *testing.T) {
	l := newFakeLock()
	c, err := Contend(context.Background(), l.library("warm"), Run{Key: "k", Workers: 3, WarmUp: true})
	if err != nil {
		t.Fatal(err)
	}
	if got := l.acquires.Load(); got != 3+int64(c.Acquisitions) {
		t.Errorf("%d acquire calls for %d acquisitions, want one warm-up each of 3 more", got, c.Acquisitions)
	}
}

func TestContendRoundsRotate(t *testing.T) {
	var mu sync.Mutex
	var order, keys []string
	lib := func(name string) Library {
		l := newFakeLock()
		return Library{Name: name, Make: func() (Contender, error) {
			return AcquireFunc(func(ctx context.Context, key string) (func(context.Context) error, error) {
				mu.Lock()
				if len(keys) == 0 || keys[len(keys)-1] != key {
					order, keys = append(order, name), append(keys, key)
				}
				mu.Unlock()
				return l.Acquire(ctx, key)
			}), nil
		}}
	}
	rs, err := ContendRounds(context.Background(), []Library{lib("a"), lib("b")}, 2, Run{Key: "k", Workers: 1, For: 10 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(order, []string{"a", "b", "b", "a"}) {
		t.Errorf("ran in the order %v", order)
	}
	if len(slices.Compact(slices.Sorted(slices.Values(keys)))) != 4 {
		t.Errorf("keys %v, want one per run", keys)
	}
	if len(rs["a"]) != 2 || len(rs["b"]) != 2 || len(rs["a"].Rates()) != 2 {
		t.Errorf("rounds: %d and %d", len(rs["a"]), len(rs["b"]))
	}
}

func TestRotate(t *testing.T) {
	xs := []int{1, 2, 3}
	for r, want := range [][]int{{1, 2, 3}, {2, 3, 1}, {3, 1, 2}, {1, 2, 3}} {
		if got := Rotate(xs, r); !slices.Equal(got, want) {
			t.Errorf("Rotate(%v, %d) = %v, want %v", xs, r, got, want)
		}
	}
	if Rotate([]int(nil), 3) != nil {
		t.Error("Rotate of nothing is not nil")
	}
}

func TestPairsAndUncontendedRounds(t *testing.T) {
	l := newFakeLock()
	ds, err := Pairs(context.Background(), AcquireFunc(l.Acquire), "k", 50, 0)
	if err != nil || len(ds) != 50 {
		t.Fatalf("Pairs: %d pairs, %v", len(ds), err)
	}
	ds, err = Pairs(context.Background(), AcquireFunc(l.Acquire), "k", 1000000, time.Millisecond)
	if err != nil || len(ds) == 1000000 {
		t.Errorf("Pairs under a 1 ms limit timed %d pairs (%v)", len(ds), err)
	}
	m, err := UncontendedRounds(context.Background(), []Library{l.library("a"), newFakeLock().library("b")}, 3, 10, "k")
	if err != nil {
		t.Fatal(err)
	}
	if len(m["a"]) != 3 || len(m["b"]) != 3 || l.closed.Load() != 1 {
		t.Errorf("rounds %v, closed %d", m, l.closed.Load())
	}
}

// PairsTimed reads its clock, for the pairs' times and for the limit:
// with a clock that moves 1 ms per acquire, a 5 ms limit lets 5 pairs of
// exactly 1 ms through.
func TestPairsTimed(t *testing.T) {
	var clock time.Time
	x := AcquireFunc(func(context.Context, string) (func(context.Context) error, error) {
		clock = clock.Add(time.Millisecond)
		return func(context.Context) error { return nil }, nil
	})
	ds, err := PairsTimed(context.Background(), x, "k", 100, 5*time.Millisecond, func() time.Time { return clock })
	if err != nil || len(ds) != 5 {
		t.Fatalf("PairsTimed: %d pairs (%v), want 5", len(ds), err)
	}
	for _, d := range ds {
		if d != time.Millisecond {
			t.Errorf("pair of %v, want 1ms", d)
		}
	}
}

// The holder "dies" and its lock expires 50 ms later.
func TestRecovery(t *testing.T) {
	l := newFakeLock()
	var expired sync.WaitGroup
	kill := func(ctx context.Context, key string) (time.Time, error) {
		if _, err := l.Acquire(ctx, key); err != nil {
			return time.Time{}, err
		}
		died := time.Now()
		expired.Go(func() { time.Sleep(50 * time.Millisecond); <-l.slot })
		return died, nil
	}
	d, err := Recovery(context.Background(), "k", AcquireFunc(l.Acquire), time.Minute, kill)
	expired.Wait()
	if err != nil || d < 50*time.Millisecond || d > 5*time.Second {
		t.Errorf("Recovery = %v, %v; want about 50ms", d, err)
	}
	l.slot <- struct{}{} // held for good: the waiter gives up at its limit
	if _, err := Recovery(context.Background(), "k", AcquireFunc(l.Acquire), 10*time.Millisecond,
		func(context.Context, string) (time.Time, error) { return time.Now(), nil }); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("Recovery of a lock never freed = %v", err)
	}
}
