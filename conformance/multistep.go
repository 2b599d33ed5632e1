package conformance

import (
	"errors"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/distlock/distlock/backend"
)

// Cases for the multi-lock's one store step (backend.Batcher), run
// where the driver declares Capabilities.MultiAtomic and implements it.

// testMultiLockOneStep: a TryAcquireAll that finds one key of its set held
// never takes the others, not even for a moment: another client that
// takes and releases those others over and over, the only other client
// touching them, never finds one held. (Taken one by one, the set's first
// key is held by the failing attempt for a round trip each time.)
func testMultiLockOneStep(t *testing.T, e *env) {
	a := e.locker(t)
	if !a.Capabilities().MultiAtomic {
		t.Skipf("the %s backend takes the keys of a multi-lock one by one (no MultiAtomic)", a.Capabilities().Name)
	}
	k1, k2, k3 := e.key("s1"), e.key("s2"), e.key("s3")
	holder, prober := e.locker(t), e.locker(t)
	held := mustAcquire(t, holder, k2)
	var (
		stop     atomic.Bool
		attempts atomic.Int32
		wg       sync.WaitGroup
	)
	wg.Go(func() {
		for !stop.Load() {
			_, err := acquireAll(ctxFor(t, 10*time.Second), a.Locker, []string{k1, k2, k3}, false)
			if err != nil && !isNotAcquired(err) {
				t.Errorf("TryAcquireAll with %q held elsewhere: %v, want ErrNotAcquired", k2, err)
				return
			}
			if err == nil {
				t.Errorf("TryAcquireAll took %q while another client holds it", k2)
				return
			}
			attempts.Add(1)
		}
	})
	stopAll := sync.OnceFunc(func() { stop.Store(true); wg.Wait() })
	defer stopAll()
	const maxRounds = 300
	var tries, blocked int
	deadline := time.Now().Add(2 * time.Second)
	for round := 0; round < maxRounds && time.Now().Before(deadline); round++ {
		for _, k := range []string{k1, k3} {
			tries++
			le, err := prober.TryAcquire(ctxFor(t, 10*time.Second), k)
			if isNotAcquired(err) {
				blocked++
				continue
			}
			if err != nil {
				t.Fatalf("TryAcquire(%q): %v", k, err)
			}
			release(t, le)
		}
	}
	stopAll()
	if blocked > 0 {
		t.Errorf("%d of %d TryAcquires of %q and %q found the key held, while the only other client taking them was a TryAcquireAll that finds %q held (%d attempts): it held a part of its set", blocked, tries, k1, k3, k2, attempts.Load())
	}
	if attempts.Load() == 0 {
		t.Error("no TryAcquireAll finished while the other client probed")
	}
	release(t, held)
	check := e.locker(t)
	for _, k := range []string{k1, k2, k3} {
		if !isFree(t, check, k) {
			t.Errorf("after every attempt ended %q is still held", k)
		}
	}
}

// testMultiAcquire: TryAcquireMulti (where offered) with a key held
// elsewhere fails with ErrNotAcquired naming that key and takes none of
// the others; with every key free it grants each, in order, with a token
// above the key's earlier ones; each Lock is released on its own.
func testMultiAcquire(t *testing.T, e *env) {
	d := e.driver(t)
	ma := optional[backend.Batcher](t, d, "Batcher")
	if !d.Capabilities().MultiAtomic {
		t.Skipf("the driver has TryAcquireMulti but declares no MultiAtomic")
	}
	keys := []string{e.key("m1"), e.key("m2"), e.key("m3")}
	slices.Sort(keys)
	const owner = "multi-owner-0123456789abcdef"
	reqs := make([]backend.Request, len(keys))
	for i, k := range keys {
		reqs[i] = e.request(k, owner)
		reqs[i].TTL = max(e.ttl, 10*time.Second) // not renewed here
	}
	other, check := e.locker(t), e.locker(t)
	held := mustAcquire(t, other, keys[1])
	_, err := ma.TryAcquireMulti(ctxFor(t, 10*time.Second), reqs)
	var na *backend.NotAcquiredError
	switch {
	case !isNotAcquired(err):
		t.Errorf("TryAcquireMulti with %q held elsewhere: %v, want ErrNotAcquired", keys[1], err)
	case errors.As(err, &na) && na.Key != keys[1]:
		t.Errorf("TryAcquireMulti with %q held elsewhere names %q as held", keys[1], na.Key)
	}
	for _, k := range []string{keys[0], keys[2]} {
		if !isFree(t, check, k) {
			t.Errorf("a TryAcquireMulti that found %q held left %q held", keys[1], k)
		}
	}
	before := held.Token()
	release(t, held)
	gs, err := ma.TryAcquireMulti(ctxFor(t, 10*time.Second), reqs)
	if err != nil {
		t.Fatalf("TryAcquireMulti of free keys: %v", err)
	}
	if len(gs) != len(reqs) {
		t.Fatalf("TryAcquireMulti of %d keys returned %d grants", len(reqs), len(gs))
	}
	for i, g := range gs {
		if g.Lock == nil || g.Token == 0 {
			t.Fatalf("grant %d for %q = %+v, want a lock and a token", i, keys[i], g)
		}
		if isFree(t, check, keys[i]) {
			t.Errorf("after TryAcquireMulti granted %q another client can take it", keys[i])
		}
	}
	if gs[1].Token <= before {
		t.Errorf("token %d for %q is not above the previous holder's %d", gs[1].Token, keys[1], before)
	}
	if err := gs[0].Lock.Release(ctxFor(t, 10*time.Second)); err != nil {
		t.Fatalf("Release of %q: %v", keys[0], err)
	}
	if !isFree(t, check, keys[0]) {
		t.Errorf("%q is still held after its lock was released", keys[0])
	}
	for i, k := range keys[1:] {
		if isFree(t, check, k) {
			t.Errorf("releasing %q freed %q too", keys[0], k)
		}
		if err := gs[i+1].Lock.Release(ctxFor(t, 10*time.Second)); err != nil {
			t.Errorf("Release of %q: %v", k, err)
		}
	}
	for _, k := range keys {
		if !isFree(t, check, k) {
			t.Errorf("%q is still held after every lock was released", k)
		}
	}
}
