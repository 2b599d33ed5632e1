package distlock_test

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/distlock/distlock"
	"github.com/distlock/distlock/backend"
	"github.com/distlock/distlock/internal/shim"
	"github.com/distlock/distlock/memlock"
)

// noInspect hides memlock's Inspector: a wrapper that forwards the
// Driver and its Notifier only.
type noInspect struct{ shim.Notifier }

// undeclaredInspect is memlock's driver declaring, as Redlock does, that
// it frees a mutex (Capabilities.ForceRelease) but cannot read a lock's
// state (no Capabilities.Inspect), with its Inspect calls counted.
type undeclaredInspect struct {
	*memlock.Driver
	inspects atomic.Int32
}

func (d *undeclaredInspect) Capabilities() backend.Capabilities {
	c := d.Driver.Capabilities()
	c.Inspect = false
	return c
}

func (d *undeclaredInspect) Inspect(ctx context.Context, key string, kind backend.Kind) (backend.Info, error) {
	d.inspects.Add(1)
	return d.Driver.Inspect(ctx, key, kind)
}

// TestUndeclaredInspect: the Locker goes by Capabilities.Inspect, not by
// the Inspector's methods: an election on a driver that declares no
// Inspect answers ErrUnsupported without calling Inspect, while its
// declared ForceRelease serves.
func TestUndeclaredInspect(t *testing.T) {
	d := &undeclaredInspect{Driver: must(memlock.NewStore().NewDriver(nil))}
	l := distlock.New(d)
	defer l.Close()
	if caps := l.Capabilities(); caps.Inspect || !caps.ForceRelease {
		t.Fatalf("Capabilities: Inspect %v, ForceRelease %v; want false, true", caps.Inspect, caps.ForceRelease)
	}
	ctx := context.Background()
	el, err := l.Election("e")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := el.Leader(ctx); !errors.Is(err, distlock.ErrUnsupported) {
		t.Errorf("Leader: %v, want ErrUnsupported", err)
	}
	if _, err := el.Observe(ctx); !errors.Is(err, distlock.ErrUnsupported) {
		t.Errorf("Observe: %v, want ErrUnsupported", err)
	}
	if n := d.inspects.Load(); n != 0 {
		t.Errorf("Inspect called %d times on a driver that declares no Inspect", n)
	}
	le, err := l.TryAcquire(ctx, "job")
	if err != nil {
		t.Fatal(err)
	}
	if info, err := l.ForceRelease(ctx, "job", "ops", "test"); err != nil || info.Token != le.Token() {
		t.Errorf("ForceRelease = %+v, %v; want the holder's token %d", info, err, le.Token())
	}
}

func TestElectionWithoutInspector(t *testing.T) {
	d, _ := memlock.NewStore().NewDriver(nil)
	l := distlock.New(noInspect{shim.Notifier{Driver: d}})
	defer l.Close()
	el, err := l.Election("e")
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if _, err := el.Leader(ctx); !errors.Is(err, distlock.ErrUnsupported) {
		t.Errorf("Leader: %v, want ErrUnsupported", err)
	}
	if _, err := el.Observe(ctx); !errors.Is(err, distlock.ErrUnsupported) {
		t.Errorf("Observe: %v, want ErrUnsupported", err)
	}
	ld, err := el.Campaign(ctx, "v") // campaigning needs only the mutex
	if err != nil {
		t.Fatal(err)
	}
	if err := ld.Resign(ctx); err != nil {
		t.Fatal(err)
	}
}

func TestObserveEndsWithLocker(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := memlock.NewStore()
		d1, _ := s.NewDriver(nil)
		d2, _ := s.NewDriver(nil)
		a, o := distlock.New(d1), distlock.New(d2)
		defer a.Close()
		ea, _ := a.Election("e")
		eo, _ := o.Election("e", distlock.WithObserveInterval(10*time.Millisecond))
		ch, err := eo.Observe(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		if got := <-ch; got.Leading {
			t.Errorf("first report %+v, want nobody leading", got)
		}
		ld, err := ea.Campaign(context.Background(), "alpha")
		if err != nil {
			t.Fatal(err)
		}
		got := <-ch
		if !got.Leading || got.Value != "alpha" || got.Term != ld.Term() || !strings.HasPrefix(got.Owner, "alpha.") {
			t.Errorf("report %+v after alpha was elected with term %d", got, ld.Term())
		}
		if err := o.Close(); err != nil {
			t.Fatal(err)
		}
		select {
		case _, ok := <-ch:
			for ok {
				_, ok = <-ch
			}
		case <-time.After(5 * time.Second):
			t.Fatal("Observe's channel still open after its Locker closed")
		}
		if _, err := eo.Observe(context.Background()); !errors.Is(err, distlock.ErrClosed) {
			t.Errorf("Observe on a closed Locker: %v, want ErrClosed", err)
		}
	})
}

func TestLeaderValueOfPlainLock(t *testing.T) {
	l := distlock.New(must(memlock.NewStore().NewDriver(nil)))
	defer l.Close()
	le, err := l.Acquire(context.Background(), "e", distlock.WithOwner("plain.owner"))
	if err != nil {
		t.Fatal(err)
	}
	el, _ := l.Election("e")
	info, err := el.Leader(context.Background())
	if err != nil || info.Value != "plain.owner" || info.Owner != "plain.owner" {
		t.Errorf("Leader of a lock taken without Campaign = %+v, %v; want the owner as value", info, err)
	}
	_ = le.Release(context.Background())
}

func TestMultiLeaseEndsWithLocker(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l := distlock.New(must(memlock.NewStore().NewDriver(nil)))
		m, err := l.AcquireAll(context.Background(), []string{"b", "a", "c"})
		if err != nil {
			t.Fatal(err)
		}
		if err := m.Err(); err != nil || m.State() != distlock.StateHeld {
			t.Fatalf("Err %v, State %v", err, m.State())
		}
		owner := m.Owner()
		le, err := l.Acquire(m.Context(), "b") // the Context re-enters
		if err != nil || le.Owner() != owner {
			t.Fatalf("re-entry through the Context: %v (owner %q, want %q)", err, le.Owner(), owner)
		}
		_ = le.Release(context.Background())
		if err := l.Close(); err != nil {
			t.Fatal(err)
		}
		select {
		case <-m.Done():
		case <-time.After(5 * time.Second):
			t.Fatal("multi-lease not ended by Close")
		}
		if !errors.Is(m.Err(), distlock.ErrReleased) || m.State() != distlock.StateReleased {
			t.Errorf("after Close Err %v, State %v; want released", m.Err(), m.State())
		}
	})
}

func must[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}
