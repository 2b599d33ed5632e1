package conformance

import (
	"context"
	"errors"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/distlock/distlock"
)

// Cases for the multi-lock (Locker.AcquireAll, TryAcquireAll), which the
// portable layer builds on the mutex, so they run on every backend.

// multiLease is what the cases need of a *distlock.MultiLease.
type multiLease interface {
	Keys() []string
	Tokens() map[string]uint64
	Done() <-chan struct{}
	Err() error
	Release(ctx context.Context) error
}

// acquireAll takes keys through l: the Locker's AcquireAll (wait) or
// TryAcquireAll. The suite's own tests replace it with broken variants
// (export_test.go) to show the cases catch them.
var acquireAll = func(ctx context.Context, l *distlock.Locker, keys []string, wait bool) (multiLease, error) {
	var m *distlock.MultiLease
	var err error
	if wait {
		m, err = l.AcquireAll(ctx, keys)
	} else {
		m, err = l.TryAcquireAll(ctx, keys)
	}
	if err != nil {
		return nil, err
	}
	return m, nil
}

// testMultiLockNoDeadlock: clients taking overlapping sets in opposite
// orders, then random overlapping sets on several Lockers, all finish
// (no deadlock) and never hold a key together; each key's tokens increase.
func testMultiLockNoDeadlock(t *testing.T, e *env) {
	if !multiLockOppositeOrders(t, e) {
		return
	}
	keys, check := multiLockRandomSets(t, e)

	// The random rounds catch a key held twice only when two sets meet in
	// time. Deterministically: while one multi-lease holds keys 1 and 2, a
	// waiting AcquireAll of keys 0 and 2 (the held key not first in its
	// set) must not be granted; it ends with its ctx. Then, once the first
	// is released, it is.
	sorted := sortedSet(keys)
	held, err := acquireAll(ctxFor(t, 30*time.Second), check.Locker, sorted[1:3], true)
	if err != nil {
		t.Fatalf("AcquireAll(%q): %v", sorted[1:3], err)
	}
	want := []string{sorted[0], sorted[2]}
	if m, err := acquireAll(ctxFor(t, 300*time.Millisecond), e.locker(t).Locker, want, true); err == nil {
		t.Errorf("AcquireAll(%q) was granted while another multi-lease held %q", want, sorted[2])
		_ = m.Release(ctxFor(t, 10*time.Second))
	}
	if err := held.Release(ctxFor(t, 10*time.Second)); err != nil {
		t.Fatalf("Release: %v", err)
	}
	m, err := acquireAll(ctxFor(t, 30*time.Second), check.Locker, want, true)
	if err != nil {
		t.Fatalf("AcquireAll(%q) after the other multi-lease was released: %v", want, err)
	}
	if err := m.Release(ctxFor(t, 10*time.Second)); err != nil {
		t.Errorf("Release: %v", err)
	}
}

// multiLockOppositeOrders: two clients take the same two keys in opposite
// orders at once, for three rounds; each AcquireAll must succeed (no
// deadlock). It reports false, after the first round that failed, if any
// did.
func multiLockOppositeOrders(t *testing.T, e *env) bool {
	x, y := e.key("x"), e.key("y")
	a, b := e.locker(t), e.locker(t)
	for round := range 3 {
		var wg sync.WaitGroup
		start := make(chan struct{})
		for _, p := range []struct {
			c    *client
			keys []string
		}{{a, []string{x, y}}, {b, []string{y, x}}} {
			wg.Go(func() {
				<-start
				m, err := acquireAll(ctxFor(t, 2*e.ttl+5*time.Second), p.c.Locker, p.keys, true)
				if err != nil {
					t.Errorf("round %d: AcquireAll(%q) of two clients taking the same keys in opposite orders: %v (deadlock?)", round, p.keys, err)
					return
				}
				work(time.Millisecond)
				if err := m.Release(ctxFor(t, 10*time.Second)); err != nil {
					t.Errorf("Release: %v", err)
				}
			})
		}
		close(start)
		wg.Wait()
		if t.Failed() {
			return false
		}
	}
	return true
}

// multiLockPool is what the random rounds of testMultiLockNoDeadlock
// share: how many multi-leases hold each key of the pool, how often one
// was held twice, each key's last token, and the rounds finished.
type multiLockPool struct {
	keys     []string
	index    map[string]int
	inside   []atomic.Int32
	overlap  atomic.Int32
	mu       sync.Mutex
	lastTok  map[string]uint64
	finished atomic.Int32
}

// multiLockRandomSets: several workers on several Lockers take random
// overlapping sets of a pool of keys (some with a duplicate) for a few
// rounds each; all finish, never hold a key together, and each key's
// tokens increase; every key is free afterwards. It returns the pool's
// keys and the client that checked them.
func multiLockRandomSets(t *testing.T, e *env) ([]string, *client) {
	const lockers, workers, rounds, pool = 3, 2, 5, 5
	p := &multiLockPool{keys: make([]string, pool), index: map[string]int{}, inside: make([]atomic.Int32, pool), lastTok: map[string]uint64{}}
	for i := range p.keys {
		p.keys[i] = e.key("pool-" + string(rune('a'+i)))
	}
	for i, k := range p.keys {
		p.index[k] = i
	}
	var wg sync.WaitGroup
	for range lockers {
		c := e.locker(t)
		for range workers {
			wg.Go(func() {
				for range rounds {
					if !p.round(t, c) {
						return
					}
				}
			})
		}
	}
	wg.Wait()
	if n := p.overlap.Load(); n > 0 {
		t.Errorf("%d times a key was held by two multi-leases at once", n)
	}
	if n, want := p.finished.Load(), int32(lockers*workers*rounds); n != want {
		t.Errorf("%d of %d multi-lock rounds finished", n, want)
	}
	check := e.locker(t)
	for _, k := range p.keys {
		if !isFree(t, check, k) {
			t.Errorf("after every multi-lease was released %q is still held", k)
		}
	}
	return p.keys, check
}

// round takes a random set of the pool's keys on c, checks its keys and
// tokens, holds it a moment and releases it. It reports false if the
// worker is to stop (AcquireAll or Release failed).
func (p *multiLockPool) round(t *testing.T, c *client) bool {
	pool := len(p.keys)
	set := slices.Clone(p.keys)
	rand.Shuffle(len(set), func(i, j int) { set[i], set[j] = set[j], set[i] })
	set = set[:2+rand.IntN(pool-1)]
	if rand.IntN(3) == 0 {
		set = append(set, set[0]) // a duplicate
	}
	m, err := acquireAll(ctxFor(t, 60*time.Second), c.Locker, set, true)
	if err != nil {
		t.Errorf("AcquireAll(%q): %v (deadlock?)", set, err)
		return false
	}
	got := m.Keys()
	if want := sortedSet(set); !slices.Equal(got, want) {
		t.Errorf("AcquireAll(%q).Keys() = %q, want %q", set, got, want)
	}
	for _, k := range got {
		if p.inside[p.index[k]].Add(1) != 1 {
			p.overlap.Add(1)
		}
	}
	p.mu.Lock()
	for k, tok := range m.Tokens() {
		if tok <= p.lastTok[k] {
			t.Errorf("token %d for %q is not above the previous holder's %d", tok, k, p.lastTok[k])
		}
		p.lastTok[k] = tok
	}
	p.mu.Unlock()
	work(time.Millisecond)
	for _, k := range got {
		p.inside[p.index[k]].Add(-1)
	}
	if err := m.Release(ctxFor(t, 10*time.Second)); err != nil {
		t.Errorf("Release: %v", err)
		return false
	}
	p.finished.Add(1)
	return true
}

func sortedSet(keys []string) []string {
	out := slices.Clone(keys)
	slices.Sort(out)
	return slices.Compact(out)
}

// testMultiLockNothingPartial: a multi-lock that fails midway (a key held
// by another owner, the ctx ending, an invalid key, no keys) leaves none
// of its keys held; duplicates are taken once; releasing twice is an
// error.
func testMultiLockNothingPartial(t *testing.T, e *env) {
	k1, k2, k3 := e.key("k1"), e.key("k2"), e.key("k3")
	a, other, check := e.locker(t), e.locker(t), e.locker(t)
	allFree := func(what string, keys ...string) {
		t.Helper()
		for _, k := range keys {
			if !isFree(t, check, k) {
				t.Errorf("%s: %q is still held", what, k)
			}
		}
	}
	held := mustAcquire(t, other, k2)
	_, err := acquireAll(ctxFor(t, 10*time.Second), a.Locker, []string{k3, k1, k2}, false)
	for try := 1; errors.Is(err, distlock.ErrUnavailable) && try < 3; try++ {
		// The store answered too slowly for a grant to be a lease (a grant
		// that came after its validity ran out): the machine, not the
		// rule. What it took is given back (in the background, at once);
		// then try again.
		t.Logf("TryAcquireAll, attempt %d: %v", try, err)
		for _, k := range []string{k1, k3} {
			if !eventually(2*e.ttl+5*time.Second, func() bool { return isFree(t, check, k) }) {
				t.Errorf("after a TryAcquireAll failed as unavailable, %q stayed held", k)
			}
		}
		_, err = acquireAll(ctxFor(t, 10*time.Second), a.Locker, []string{k3, k1, k2}, false)
	}
	if !isNotAcquired(err) || !strings.Contains(errString(err), k2) {
		t.Errorf("TryAcquireAll with %q held elsewhere: %v, want ErrNotAcquired naming it", k2, err)
	}
	allFree("after a TryAcquireAll failed at the middle key", k1, k3)
	_, err = acquireAll(ctxFor(t, e.ttl/2), a.Locker, []string{k3, k2, k1}, true)
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("AcquireAll whose ctx ended waiting for %q: %v, want context.DeadlineExceeded", k2, err)
	}
	allFree("after an AcquireAll gave up at the middle key", k1, k3)
	release(t, held)

	for _, bad := range [][]string{{k1, "", k3}, {k1, "bad\x00key", k3}, {}} {
		if _, err := acquireAll(ctxFor(t, 10*time.Second), a.Locker, bad, true); !errors.Is(err, distlock.ErrInvalidKey) {
			t.Errorf("AcquireAll(%q): %v, want ErrInvalidKey", bad, err)
		}
	}
	allFree("after AcquireAlls with invalid keys", k1, k3)

	m, err := acquireAll(ctxFor(t, 30*time.Second), a.Locker, []string{k3, k1, k3}, true)
	if err != nil {
		t.Fatalf("AcquireAll with a duplicate: %v", err)
	}
	if got := m.Keys(); !slices.Equal(got, []string{k1, k3}) {
		t.Errorf("Keys() = %q, want %q", got, []string{k1, k3})
	}
	if toks := m.Tokens(); len(toks) != 2 || toks[k1] == 0 || toks[k3] == 0 {
		t.Errorf("Tokens() = %v, want a token for each of %q and %q", toks, k1, k3)
	}
	if _, err := acquireAll(ctxFor(t, 10*time.Second), other.Locker, []string{k2, k3}, false); !isNotAcquired(err) {
		t.Errorf("TryAcquireAll of an overlapping set by another Locker: %v, want ErrNotAcquired", err)
	}
	allFree("after an overlapping TryAcquireAll failed", k2)
	if err := m.Release(ctxFor(t, 10*time.Second)); err != nil {
		t.Fatalf("Release: %v", err)
	}
	if err := m.Release(ctxFor(t, 10*time.Second)); !errors.Is(err, distlock.ErrReleased) {
		t.Errorf("Release twice: %v, want ErrReleased", err)
	}
	if !errors.Is(m.Err(), distlock.ErrReleased) {
		t.Errorf("Err() after Release = %v, want ErrReleased", m.Err())
	}
	allFree("after Release", k1, k2, k3)
}

func errString(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}

// testMultiLockLossOfPart: a key of a multi-lease removed behind its
// holder's back ends the whole multi-lease (Done, ErrLost naming the key)
// within the loss bound, and its other keys are released.
func testMultiLockLossOfPart(t *testing.T, e *env) {
	p1, p2, p3 := e.key("p1"), e.key("p2"), e.key("p3")
	a, check := e.locker(t), e.locker(t)
	m, err := acquireAll(ctxFor(t, 30*time.Second), a.Locker, []string{p1, p2, p3}, true)
	if err != nil {
		t.Fatalf("AcquireAll: %v", err)
	}
	if err := e.h.Delete(ctxFor(t, 10*time.Second), p2); err != nil {
		t.Fatalf("harness Delete: %v", err)
	}
	select {
	case <-m.Done():
	case <-time.After(2*e.ttl + 5*time.Second):
		t.Fatal("a multi-lease whose key was deleted behind its back did not end")
	}
	if err := m.Err(); !errors.Is(err, distlock.ErrLost) || !strings.Contains(err.Error(), p2) {
		t.Errorf("Err() = %v, want ErrLost naming %q", err, p2)
	}
	for _, k := range []string{p1, p3} {
		if !eventually(2*e.ttl+5*time.Second, func() bool { return isFree(t, check, k) }) {
			t.Errorf("after the multi-lease was lost its key %q is still held", k)
		}
	}
	if err := m.Release(ctxFor(t, 10*time.Second)); !errors.Is(err, distlock.ErrLost) {
		t.Errorf("Release of a lost multi-lease: %v, want ErrLost", err)
	}
}
