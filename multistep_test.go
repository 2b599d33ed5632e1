package distlock_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/distlock/distlock"
	"github.com/distlock/distlock/backend"
	"github.com/distlock/distlock/internal/shim"
	"github.com/distlock/distlock/memlock"
)

// countingMulti wraps a memlock driver, counting its acquisition calls;
// with unsupported set its TryAcquireMulti refuses every set.
type countingMulti struct {
	*memlock.Driver
	unsupported bool

	mu           sync.Mutex
	multi, tries int
}

func (d *countingMulti) TryAcquire(ctx context.Context, req backend.Request) (backend.Grant, error) {
	d.mu.Lock()
	d.tries++
	d.mu.Unlock()
	return d.Driver.TryAcquire(ctx, req)
}

func (d *countingMulti) TryAcquireMulti(ctx context.Context, reqs []backend.Request) ([]backend.Grant, error) {
	d.mu.Lock()
	d.multi++
	d.mu.Unlock()
	if d.unsupported {
		return nil, fmt.Errorf("counting: %w: not this set", backend.ErrUnsupported)
	}
	return d.Driver.TryAcquireMulti(ctx, reqs)
}

func (d *countingMulti) counts() (multi, tries int) {
	d.mu.Lock()
	defer d.mu.Unlock()
	multi, tries = d.multi, d.tries
	d.multi, d.tries = 0, 0
	return multi, tries
}

// TestMultiLockOneStep: on a store with the one step, TryAcquireAll and an
// uncontended AcquireAll make one driver call for all their keys; a set
// the store refuses (ErrUnsupported), and a set with a key the owner
// already holds through this Locker (a re-entry), go key by key; an
// AcquireAll whose step finds a key held waits for it key by key.
func TestMultiLockOneStep(t *testing.T) {
	ctx := context.Background()
	s := memlock.NewStore()
	d := &countingMulti{Driver: must(s.NewDriver(&memlock.Options{Wait: backend.WaitPoll}))}
	l := distlock.New(d, distlock.WithDefaultTTL(time.Minute))
	defer l.Close()
	if !l.Capabilities().MultiAtomic {
		t.Fatal("Capabilities().MultiAtomic is false over a driver with TryAcquireMulti")
	}
	keys := []string{"c", "a", "b"}
	check := func(what string, wantMulti, wantTries int) {
		t.Helper()
		if m, n := d.counts(); m != wantMulti || n != wantTries {
			t.Errorf("%s: %d TryAcquireMulti and %d TryAcquire calls, want %d and %d", what, m, n, wantMulti, wantTries)
		}
	}

	for _, wait := range []bool{false, true} {
		var m *distlock.MultiLease
		var err error
		if wait {
			m, err = l.AcquireAll(ctx, keys)
		} else {
			m, err = l.TryAcquireAll(ctx, keys)
		}
		if err != nil {
			t.Fatal(err)
		}
		check(fmt.Sprintf("wait=%v of 3 free keys", wait), 1, 0)
		toks := m.Tokens()
		if len(toks) != 3 || toks["a"] == 0 || toks["b"] == 0 || toks["c"] == 0 {
			t.Errorf("tokens %v, want one per key", toks)
		}
		// Re-entry: the owner holds a and b through this Locker.
		again, err := l.TryAcquireAll(m.Context(), []string{"a", "b", "d"})
		if err != nil {
			t.Fatal(err)
		}
		check("a re-entry", 0, 1) // d alone reaches the store; a and b are re-entered here
		if again.Tokens()["a"] != toks["a"] {
			t.Errorf("re-entered token %d, want %d", again.Tokens()["a"], toks["a"])
		}
		if err := again.Release(ctx); err != nil {
			t.Fatal(err)
		}
		if err := m.Release(ctx); err != nil {
			t.Fatal(err)
		}
	}

	other := distlock.New(must(s.NewDriver(nil)))
	defer other.Close()
	held, err := other.Acquire(ctx, "b")
	if err != nil {
		t.Fatal(err)
	}
	_, err = l.TryAcquireAll(ctx, keys)
	if !errors.Is(err, distlock.ErrNotAcquired) || !strings.Contains(err.Error(), `"b"`) {
		t.Errorf("TryAcquireAll with b held: %v, want ErrNotAcquired naming b", err)
	}
	check("TryAcquireAll with b held", 1, 0)
	time.AfterFunc(100*time.Millisecond, func() { _ = held.Release(ctx) })
	m, err := l.AcquireAll(ctx, keys)
	if err != nil {
		t.Fatal(err)
	}
	if multi, tries := d.counts(); multi != 1 || tries < 3 {
		t.Errorf("AcquireAll with b held a while: %d TryAcquireMulti and %d TryAcquire calls, want 1 and then at least one per key", multi, tries)
	}
	if err := m.Release(ctx); err != nil {
		t.Fatal(err)
	}

	d.unsupported = true
	m, err = l.TryAcquireAll(ctx, keys)
	if err != nil {
		t.Fatal(err)
	}
	check("TryAcquireAll of a set the store refuses", 1, 3)
	if err := m.Release(ctx); err != nil {
		t.Fatal(err)
	}
	if n := s.Len(); n != 0 {
		t.Errorf("the store keeps %d keys after every release", n)
	}
}

// hideMulti forwards a driver without its TryAcquireMulti (as a fault
// injector or metrics shim would).
type hideMulti struct{ shim.Notifier }

// TestMultiAtomicNeedsTheMethod: a driver that forwards capabilities
// declaring MultiAtomic without implementing TryAcquireMulti is a driver
// without the step: the Locker is built, says MultiAtomic false, and takes
// keys one by one.
func TestMultiAtomicNeedsTheMethod(t *testing.T) {
	d := hideMulti{shim.Notifier{Driver: must(memlock.NewStore().NewDriver(nil))}}
	if !d.Capabilities().MultiAtomic {
		t.Fatal("memlock declares no MultiAtomic")
	}
	if err := d.Capabilities().Check(d); err != nil {
		t.Fatalf("Check: %v", err)
	}
	l := distlock.New(d)
	defer l.Close()
	if l.Capabilities().MultiAtomic {
		t.Error("Locker.Capabilities().MultiAtomic is true over a driver without TryAcquireMulti")
	}
	m, err := l.TryAcquireAll(context.Background(), []string{"x", "y"})
	if err != nil {
		t.Fatal(err)
	}
	if err := m.Release(context.Background()); err != nil {
		t.Fatal(err)
	}
}
