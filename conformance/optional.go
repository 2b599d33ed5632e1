package conformance

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/distlock/distlock"
	"github.com/distlock/distlock/backend"
)

// Cases for the optional interfaces of backend (Inspector, Batcher,
// Notifier, Waiter), each run only when the driver implements it (and, for
// what a driver may lack within one, declares or answers it), as
// testing/fstest checks the optional interfaces of an fs.FS.

func optional[T any](t *testing.T, d backend.Driver, what string) T {
	t.Helper()
	v, ok := d.(T)
	if !ok {
		t.Skipf("the driver does not implement backend.%s", what)
	}
	return v
}

// inspector returns d's Inspector where d declares that it reads a lock's
// state (Capabilities.Inspect, as Offers leaves it), or skips the case.
// A driver that implements Inspector without declaring Inspect (Redlock,
// for its ForceRelease) must answer ErrUnsupported.
func inspector(t *testing.T, d backend.Driver) backend.Inspector {
	t.Helper()
	caps := d.Capabilities()
	if caps.Offers(d).Inspect {
		return d.(backend.Inspector)
	}
	if in, ok := d.(backend.Inspector); ok {
		if _, err := in.Inspect(ctxFor(t, 10*time.Second), "undeclared-inspect", backend.Exclusive); !errors.Is(err, backend.ErrUnsupported) {
			t.Errorf("%s declares no Inspect, but Inspect answers %v, want an error matching ErrUnsupported", caps.Name, err)
		}
		if _, err := in.List(ctxFor(t, 10*time.Second), "", 1); !errors.Is(err, backend.ErrUnsupported) {
			t.Errorf("%s declares no Inspect, but List answers %v, want an error matching ErrUnsupported", caps.Name, err)
		}
	}
	t.Skipf("%s does not declare Inspect (Capabilities.Inspect)", caps.Name)
	return nil
}

// testInspect: Inspect reports a free key as free, a held key with its
// holder's owner and token, and the key free again after the release.
func testInspect(t *testing.T, e *env) {
	d := e.driver(t)
	in := inspector(t, d)
	a := e.locker(t)
	key := e.key("inspect")
	info, err := in.Inspect(ctxFor(t, 10*time.Second), key, backend.Exclusive)
	if err != nil {
		t.Fatalf("Inspect of a free key: %v", err)
	}
	if info.Held || info.Key != key {
		t.Errorf("Inspect of a free key = %+v, want not held, key %q", info, key)
	}
	le := mustAcquire(t, a, key)
	info, err = in.Inspect(ctxFor(t, 10*time.Second), key, backend.Exclusive)
	if err != nil {
		t.Fatalf("Inspect of a held key: %v", err)
	}
	if !info.Held || info.Owner != le.Owner() || (info.Token != 0 && info.Token != le.Token()) {
		t.Errorf("Inspect of a held key = %+v, want held by %q with token %d", info, le.Owner(), le.Token())
	}
	if info.TTL < 0 || info.TTL > 2*e.ttl+time.Minute {
		t.Errorf("Inspect reports a remaining TTL of %v for a lease of %v", info.TTL, e.ttl)
	}
	release(t, le)
	if !eventually(e.ttl, func() bool {
		info, err = in.Inspect(ctxFor(t, 10*time.Second), key, backend.Exclusive)
		return err == nil && !info.Held
	}) {
		t.Errorf("after the release Inspect still reports %+v (%v)", info, err)
	}
}

// testList: List reports exactly the held keys under a prefix, sorted,
// with their holders' owners and tokens, honours its limit, and drops a
// key once it is released.
func testList(t *testing.T, e *env) {
	d := e.driver(t)
	ls := inspector(t, d)
	a := e.locker(t)
	prefix := e.key("list/")
	b := mustAcquire(t, a, prefix+"b")
	le := mustAcquire(t, a, prefix+"a")
	mustAcquire(t, a, e.key("lis")) // outside the prefix
	infos, err := ls.List(ctxFor(t, 10*time.Second), prefix, 0)
	if errors.Is(err, backend.ErrUnsupported) {
		t.Skipf("the store cannot list its locks: %v", err)
	}
	if err != nil {
		t.Fatalf("List(%q): %v", prefix, err)
	}
	want := []*distlock.Lease{le, b}
	if len(infos) != len(want) {
		t.Fatalf("List(%q) = %+v, want %q and %q", prefix, infos, le.Key(), b.Key())
	}
	for i, w := range want {
		got := infos[i]
		if got.Key != w.Key() || !got.Held || got.Owner != w.Owner() || (got.Token != 0 && got.Token != w.Token()) {
			t.Errorf("List(%q)[%d] = %+v, want %q held by %q with token %d", prefix, i, got, w.Key(), w.Owner(), w.Token())
		}
	}
	if infos, err = ls.List(ctxFor(t, 10*time.Second), prefix, 1); err != nil || len(infos) != 1 || infos[0].Key != le.Key() {
		t.Errorf("List(%q, limit 1) = %+v, %v; want only %q", prefix, infos, err, le.Key())
	}
	release(t, le)
	if !eventually(e.ttl, func() bool {
		infos, err = ls.List(ctxFor(t, 10*time.Second), prefix, 0)
		return err == nil && len(infos) == 1 && infos[0].Key == b.Key()
	}) {
		t.Errorf("after releasing %q List(%q) = %+v, %v; want only %q", le.Key(), prefix, infos, err, b.Key())
	}
}

// testBatchRefresh: RefreshAll answers for each lock on its own: held ones
// are extended, one removed behind its holder's back fails with ErrNotHeld
// without failing the others, and a lock of another driver is refused.
func testBatchRefresh(t *testing.T, e *env) {
	d, other := e.driver(t), e.driver(t)
	br := optional[backend.Batcher](t, d, "Batcher")
	if !d.Capabilities().BatchRefresh {
		t.Skip("the driver declares no BatchRefresh")
	}
	var locks []backend.Lock
	var ttls []time.Duration
	for _, name := range []string{"batch-a", "batch-b", "batch-c"} {
		g, err := d.TryAcquire(ctxFor(t, 10*time.Second), e.request(e.key(name), "batch-owner-0123456789abcdef"))
		if err != nil {
			t.Fatalf("TryAcquire %s: %v", name, err)
		}
		t.Cleanup(func() { _ = g.Lock.Release(ctxFor(t, 10*time.Second)) })
		locks, ttls = append(locks, g.Lock), append(ttls, e.ttl)
	}
	if err := e.h.Delete(ctxFor(t, 10*time.Second), e.key("batch-b")); err != nil {
		t.Fatalf("harness Delete: %v", err)
	}
	g, err := other.TryAcquire(ctxFor(t, 10*time.Second), e.request(e.key("batch-other"), "batch-other-0123456789abcdef"))
	if err != nil {
		t.Fatalf("other driver TryAcquire: %v", err)
	}
	t.Cleanup(func() { _ = g.Lock.Release(ctxFor(t, 10*time.Second)) })
	locks, ttls = append(locks, g.Lock), append(ttls, e.ttl)
	var errs []error
	// A store may notice the deletion only after a moment (a session's
	// watch): retry until it reports it, within a TTL.
	eventually(e.ttl, func() bool {
		errs = br.RefreshAll(ctxFor(t, 10*time.Second), locks, ttls)
		return len(errs) == len(locks) && errs[1] != nil
	})
	if len(errs) != len(locks) {
		t.Fatalf("RefreshAll returned %d errors for %d locks", len(errs), len(locks))
	}
	for _, i := range []int{0, 2} {
		if errs[i] != nil {
			t.Errorf("RefreshAll of a held lock (%d): %v", i, errs[i])
		}
	}
	if !errors.Is(errs[1], distlock.ErrNotHeld) {
		t.Errorf("RefreshAll of a lock removed behind its back: %v, want ErrNotHeld", errs[1])
	}
	if errs[3] == nil {
		t.Error("RefreshAll accepted a lock of another driver")
	}
}

// testNotify: a subscriber hears a release within a bound, and canceling
// the subscription leaves nothing running (the suite's goroutine check).
func testNotify(t *testing.T, e *env) {
	d, holder := e.driver(t), e.driver(t)
	n := optional[backend.Notifier](t, d, "Notifier")
	key := e.key("notify")
	g, err := holder.TryAcquire(ctxFor(t, 10*time.Second), e.request(key, "notify-holder-0123456789abcdef"))
	if err != nil {
		t.Fatal(err)
	}
	ch, cancel, err := n.Subscribe(ctxFor(t, 10*time.Second), key, backend.Exclusive)
	if err != nil {
		t.Fatalf("Subscribe: %v", err)
	}
	defer cancel()
	// Drain anything announced before the release (allowed: coalesced,
	// possibly spurious).
	select {
	case <-ch:
	default:
	}
	if err := g.Lock.Release(ctxFor(t, 10*time.Second)); err != nil {
		t.Fatal(err)
	}
	select {
	case <-ch:
	case <-time.After(e.ttl):
		t.Fatalf("no release announced within %v", e.ttl)
	}
}

// testWait: Wait returns the lock soon after its holder releases it, with
// a greater token, and a Wait whose ctx ends returns its error and leaves
// nothing queued or held.
func testWait(t *testing.T, e *env) {
	d, holder, third := e.driver(t), e.driver(t), e.driver(t)
	w := optional[backend.Waiter](t, d, "Waiter")
	if caps := d.Capabilities(); caps.Wait != backend.WaitQueue {
		t.Skipf("%s declares Wait=%s: the portable layer does not use its Waiter", caps.Name, caps.Wait)
	}
	key := e.key("wait")
	g1, err := holder.TryAcquire(ctxFor(t, 10*time.Second), e.request(key, "wait-holder-0123456789abcdef"))
	if err != nil {
		t.Fatal(err)
	}
	// A wait that gives up.
	ctx, cancel := context.WithTimeout(context.Background(), e.ttl/3)
	_, err = w.Wait(ctx, e.request(key, "wait-quitter-0123456789abcde"))
	cancel()
	if err == nil || !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("a Wait whose ctx ended: %v, want an error matching context.DeadlineExceeded", err)
	}
	type result struct {
		g   backend.Grant
		err error
	}
	got := make(chan result, 1)
	go func() {
		g, err := w.Wait(ctxFor(t, 4*e.ttl+10*time.Second), e.request(key, "wait-waiter-0123456789abcdef"))
		got <- result{g, err}
	}()
	// The waiter is in line once the store counts it (where it can).
	if e.storeWaiters(t, holder, Mutex, key) >= 0 && !eventually(waitLimit, func() bool { return e.storeWaiters(t, holder, Mutex, key) >= 1 }) {
		t.Fatalf("the waiter was not in line within %v", waitLimit)
	}
	released := time.Now()
	if err := g1.Lock.Release(ctxFor(t, 10*time.Second)); err != nil {
		t.Fatal(err)
	}
	r := <-got
	if r.err != nil {
		t.Fatalf("Wait: %v", r.err)
	}
	if took := time.Since(released); took > e.ttl {
		t.Errorf("Wait returned %v after the release, want well within the TTL", took)
	}
	if r.g.Token <= g1.Token {
		t.Errorf("Wait's token %d is not above the previous holder's %d", r.g.Token, g1.Token)
	}
	if err := r.g.Lock.Release(ctxFor(t, 10*time.Second)); err != nil {
		t.Fatal(err)
	}
	// Nothing of the given-up wait is left: the key is free at once.
	g3, err := third.TryAcquire(ctxFor(t, 10*time.Second), e.request(key, "wait-third-0123456789abcdef0"))
	if err != nil {
		t.Fatalf("after every wait ended the key is not free: %v", err)
	}
	_ = g3.Lock.Release(ctxFor(t, 10*time.Second))
}
