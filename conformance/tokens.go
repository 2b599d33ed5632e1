package conformance

import (
	"testing"
	"time"

	"github.com/distlock/distlock"
)

func testFencingTokens(t *testing.T, e *env) {
	key := e.key("tokens")
	a, b := e.locker(t), e.locker(t)
	var last uint64
	next := func(le *distlock.Lease, how string) {
		t.Helper()
		if tok := le.Token(); tok <= last {
			t.Errorf("%s: token %d, not greater than the previous %d", how, tok, last)
		} else {
			last = tok
		}
	}
	le := mustAcquire(t, a, key)
	next(le, "first holder")
	release(t, le)

	le = mustAcquire(t, b, key)
	next(le, "another Locker after a release")
	inner := mustAcquire(t, b, key, distlock.WithOwner(le.Owner()))
	if inner.Token() != le.Token() {
		t.Errorf("re-entry token %d, want the hold's %d", inner.Token(), le.Token())
	}
	release(t, inner)
	release(t, le)

	le = mustAcquire(t, a, key, distlock.WithoutAutoRenew())
	next(le, "same Locker again")
	if !waitDone(le, 2*e.ttl+5*time.Second) {
		t.Fatal("lease without auto-renewal did not expire")
	}
	le = mustAcquire(t, b, key)
	next(le, "after the previous holder expired")
	release(t, le)

	c := e.locker(t)
	le = mustAcquire(t, c, key)
	next(le, "a third Locker")
	if err := e.h.Kill(ctxFor(t, 10*time.Second), c.d); err != nil {
		t.Fatalf("harness Kill: %v", err)
	}
	le, err := b.Acquire(ctxFor(t, 4*e.ttl+10*time.Second), key)
	if err != nil {
		t.Fatalf("Acquire after the holder crashed: %v", err)
	}
	next(le, "after the previous holder crashed")
	release(t, le)
}
