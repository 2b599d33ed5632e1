// Package insptest checks a backend's backend.Inspector for semaphores
// and read-write locks against grants made through a Locker: that it
// report the grants held now, with their owners, permits and tokens, and
// nothing once they are released. It is for the backends' own tests.
package insptest

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/distlock/distlock"
	"github.com/distlock/distlock/backend"
	"github.com/distlock/distlock/conformance"
)

// Run checks the inspectors the harness's drivers implement; it skips
// those they do not.
func Run(t *testing.T, h conformance.Harness) {
	t.Cleanup(func() { _ = h.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	prefix := fmt.Sprintf("insptest-%d-", time.Now().UnixNano())
	locker := func() *distlock.Locker {
		t.Helper()
		d, err := h.NewDriver(ctx)
		if err != nil {
			t.Fatal(err)
		}
		l := distlock.New(d, distlock.WithDefaultTTL(h.TTL()))
		t.Cleanup(func() { _ = l.Close() })
		return l
	}
	var in backend.Inspector // nil unless the store reads a lock's state (Capabilities.Inspect)
	if l := locker(); l.Capabilities().Inspect {
		in = l.Driver().(backend.Inspector)
	}
	t.Run("Semaphore", func(t *testing.T) {
		skipUninspected(ctx, t, in, backend.Permits)
		testSemaphore(ctx, t, in, locker(), locker(), prefix+"sem", h.TTL())
	})
	t.Run("RW", func(t *testing.T) {
		skipUninspected(ctx, t, in, backend.Write)
		testRW(ctx, t, in, locker(), locker(), prefix+"rw", h.TTL())
	})
}

// skipUninspected skips t if in is nil or cannot inspect kind.
func skipUninspected(ctx context.Context, t *testing.T, in backend.Inspector, kind backend.Kind) {
	t.Helper()
	if in == nil {
		t.Skip("no Inspector")
	}
	if _, err := in.Inspect(ctx, "insptest-probe", kind); errors.Is(err, backend.ErrUnsupported) {
		t.Skipf("no %s inspection: %v", kind, err)
	}
}

// testSemaphore: two grants of 1 and 2 permits on two Lockers are both
// reported, with their owners, permits and tokens; after a release only
// the other; after both, none.
func testSemaphore(ctx context.Context, t *testing.T, in backend.Inspector, a, b *distlock.Locker, key string, ttl time.Duration) {
	empty, err := in.Inspect(ctx, key, backend.Permits)
	if err != nil || empty.Held || empty.Permits != 0 || len(empty.Holders) != 0 {
		t.Fatalf("a semaphore never used: %+v, %v; want no grant", empty, err)
	}
	sa, err := a.Semaphore(key, 4)
	if err != nil {
		t.Skipf("no semaphore: %v", err)
	}
	sb, err := b.Semaphore(key, 4)
	if err != nil {
		t.Fatal(err)
	}
	one, err := sa.Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	two, err := sb.AcquireN(ctx, 2)
	if err != nil {
		t.Fatal(err)
	}
	check := func(held ...*distlock.Lease) {
		t.Helper()
		info, err := in.Inspect(ctx, key, backend.Permits)
		if err != nil {
			t.Fatal(err)
		}
		want := 0
		for _, le := range held {
			want += le.Permits()
		}
		if info.Key != key || info.Permits != want || info.Held != (want > 0) || len(info.Holders) != len(held) {
			t.Fatalf("Inspect(permits) = %+v, want key %q, %d permits held by %d grants", info, key, want, len(held))
		}
		for _, le := range held {
			i := slices.IndexFunc(info.Holders, func(h backend.Holder) bool { return h.Owner == le.Owner() })
			if i < 0 {
				t.Fatalf("Inspect(permits) = %+v: no grant of owner %q", info, le.Owner())
			}
			checkHolder(t, info.Holders[i], le, le.Permits(), ttl)
		}
	}
	check(one, two)
	if err := one.Release(ctx); err != nil {
		t.Fatal(err)
	}
	check(two)
	if err := two.Release(ctx); err != nil {
		t.Fatal(err)
	}
	check()
}

// testRW: two readers on two Lockers are reported as readers with the
// last write's token, then a writer as the writer; a free lock has none.
func testRW(ctx context.Context, t *testing.T, in backend.Inspector, a, b *distlock.Locker, key string, ttl time.Duration) {
	ma, err := a.RWMutex(key)
	if err != nil {
		t.Skipf("no read-write lock: %v", err)
	}
	mb, err := b.RWMutex(key)
	if err != nil {
		t.Fatal(err)
	}
	check := func(writer *distlock.Lease, readers ...*distlock.Lease) {
		t.Helper()
		info, err := in.Inspect(ctx, key, backend.Write)
		if err != nil {
			t.Fatal(err)
		}
		held := writer != nil || len(readers) > 0
		if info.Key != key || (info.Owner != "") != (writer != nil) || len(info.Holders) != len(readers) || info.Held != held {
			t.Fatalf("Inspect(rw) = %+v, want key %q, writer %v, %d readers", info, key, writer != nil, len(readers))
		}
		if writer != nil {
			if info.Owner != writer.Owner() {
				t.Fatalf("Inspect(rw) writer = %+v, want owner %q", info, writer.Owner())
			}
			checkHolder(t, backend.Holder{Owner: info.Owner, Token: info.Token, TTL: info.TTL}, writer, 0, ttl)
		}
		for _, le := range readers {
			i := slices.IndexFunc(info.Holders, func(h backend.Holder) bool { return h.Owner == le.Owner() })
			if i < 0 {
				t.Fatalf("Inspect(rw) = %+v: no reader %q", info, le.Owner())
			}
			checkHolder(t, info.Holders[i], le, 0, ttl)
		}
	}
	check(nil)
	w, err := ma.Lock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	check(w)
	if err := w.Release(ctx); err != nil {
		t.Fatal(err)
	}
	r1, err := ma.RLock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	r2, err := mb.RLock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	check(nil, r1, r2)
	for _, le := range []*distlock.Lease{r1, r2} {
		if err := le.Release(ctx); err != nil {
			t.Fatal(err)
		}
	}
	check(nil)
}

// checkHolder compares a reported grant with the lease: permits (when
// given), token (0 is "cannot tell") and a remaining TTL within the lease's.
func checkHolder(t *testing.T, h backend.Holder, le *distlock.Lease, permits int, ttl time.Duration) {
	t.Helper()
	if permits > 0 && h.Permits != permits {
		t.Errorf("grant of %q: %d permits reported, want %d", le.Owner(), h.Permits, permits)
	}
	if h.Token != 0 && h.Token != le.Token() {
		t.Errorf("grant of %q: token %d reported, want %d", le.Owner(), h.Token, le.Token())
	}
	if h.TTL < 0 || h.TTL > 2*ttl+time.Minute {
		t.Errorf("grant of %q: remaining TTL %v reported for a lease of %v", le.Owner(), h.TTL, ttl)
	}
}
