package kinds

import (
	"context"
	"errors"
	"testing"

	"github.com/distlock/distlock/backend"
)

// fake is a driver that records which of its methods a Table called.
type fake struct {
	caps   backend.Capabilities
	called string
}

func (f *fake) Capabilities() backend.Capabilities { return f.caps }

func try(name string) Acquirer[*fake] {
	return func(f *fake, _ context.Context, _ backend.Request) (backend.Grant, error) {
		f.called = name
		return backend.Grant{Token: 1}, nil
	}
}

func inspect(name string) InspectFunc[*fake] {
	return func(f *fake, _ context.Context, _ string) (backend.Info, error) {
		f.called = name
		return backend.Info{}, nil
	}
}

var table = Table[*fake]{
	Name:     "fake",
	TryMutex: try("tryMutex"), TryRW: try("tryRW"), TryPermits: try("tryPermits"),
	WaitMutex:    try("waitMutex"), // no read-write or permit waits
	InspectMutex: inspect("inspectMutex"), InspectPermits: inspect("inspectPermits"),
}

// A Table routes each kind to its family's method, refuses a kind the
// driver's Capabilities do not declare (before calling anything), and a
// family without a method, with ErrUnsupported naming the driver.
func TestTableRoutesAndRefuses(t *testing.T) {
	ctx := context.Background()
	all := backend.Capabilities{Wait: backend.WaitQueue, RW: backend.WaitPoll, Semaphore: backend.WaitPoll}
	for _, tc := range []struct {
		kind backend.Kind
		caps backend.Capabilities
		want string // the method called; "" for a refusal
	}{
		{backend.Exclusive, all, "tryMutex"},
		{backend.Read, all, "tryRW"},
		{backend.Write, all, "tryRW"},
		{backend.Permits, all, "tryPermits"},
		{backend.Exclusive, backend.Capabilities{Wait: backend.WaitQueue}, "tryMutex"},
		{backend.Read, backend.Capabilities{Wait: backend.WaitQueue}, ""},
		{backend.Permits, backend.Capabilities{Wait: backend.WaitQueue, RW: backend.WaitPoll}, ""},
		{backend.Kind(9), all, ""},
	} {
		f := &fake{caps: tc.caps}
		_, err := table.TryAcquire(f, ctx, backend.Request{Kind: tc.kind})
		if f.called != tc.want {
			t.Errorf("TryAcquire of %v with %+v called %q, want %q", tc.kind, tc.caps, f.called, tc.want)
		}
		if tc.want == "" && (!errors.Is(err, backend.ErrUnsupported) || err == nil) {
			t.Errorf("TryAcquire of %v with %+v: %v, want ErrUnsupported", tc.kind, tc.caps, err)
		}
	}
	f := &fake{caps: all}
	if _, err := table.Wait(f, ctx, backend.Request{Kind: backend.Read}); !errors.Is(err, backend.ErrUnsupported) || f.called != "" {
		t.Errorf("Wait of a family without a method: %v (called %q), want ErrUnsupported", err, f.called)
	}
	if _, err := table.Wait(f, ctx, backend.Request{}); err != nil || f.called != "waitMutex" {
		t.Errorf("Wait of the mutex: %v (called %q)", err, f.called)
	}
	f.called = ""
	if _, _, err := table.Subscribe(f, ctx, "k", backend.Exclusive); !errors.Is(err, backend.ErrUnsupported) || f.called != "" {
		t.Errorf("Subscribe with no method: %v, want ErrUnsupported", err)
	}
	if _, err := table.Inspect(f, ctx, "k", backend.Write); !errors.Is(err, backend.ErrUnsupported) {
		t.Errorf("Inspect of a family without a method: %v, want ErrUnsupported", err)
	}
	if _, err := table.Inspect(f, ctx, "k", backend.Permits); err != nil || f.called != "inspectPermits" {
		t.Errorf("Inspect of permits: %v (called %q)", err, f.called)
	}
}

// The dispatch makes no allocation of its own.
func TestTableAllocatesNothing(t *testing.T) {
	ctx := context.Background()
	f := &fake{caps: backend.Capabilities{Wait: backend.WaitQueue, RW: backend.WaitPoll, Semaphore: backend.WaitPoll}}
	req := backend.Request{Kind: backend.Write}
	if n := testing.AllocsPerRun(100, func() { _, _ = table.TryAcquire(f, ctx, req) }); n != 0 {
		t.Errorf("TryAcquire through the table: %v allocations, want 0", n)
	}
	r := table.Waiting(f)
	if n := testing.AllocsPerRun(100, func() { _, _ = r.TryAcquire(ctx, req) }); n != 0 {
		t.Errorf("TryAcquire through Routes: %v allocations, want 0", n)
	}
}

// Each Routes forwards its entry points to its table with its driver, and
// has only the entry points of its name: a driver that embeds Notifying
// has no Wait (is no backend.Waiter), one that embeds Waiting no Subscribe.
func TestRoutesForward(t *testing.T) {
	ctx := context.Background()
	f := &fake{caps: backend.Capabilities{Wait: backend.WaitQueue, RW: backend.WaitPoll, Semaphore: backend.WaitPoll}}
	check := func(what, got, want string, err error) {
		t.Helper()
		if err != nil || got != want {
			t.Errorf("%s: %v (called %q), want %q", what, err, got, want)
		}
		f.called = ""
	}
	w, n, wn := table.Waiting(f), table.Notifying(f), table.WaitingNotifying(f)
	_, err := w.TryAcquire(ctx, backend.Request{Kind: backend.Permits})
	check("Waiting.TryAcquire", f.called, "tryPermits", err)
	_, err = w.Wait(ctx, backend.Request{})
	check("Waiting.Wait", f.called, "waitMutex", err)
	_, err = n.Inspect(ctx, "k", backend.Exclusive)
	check("Notifying.Inspect", f.called, "inspectMutex", err)
	_, err = wn.Wait(ctx, backend.Request{})
	check("WaitingNotifying.Wait", f.called, "waitMutex", err)
	if _, _, err := n.Subscribe(ctx, "k", backend.Exclusive); !errors.Is(err, backend.ErrUnsupported) {
		t.Errorf("Notifying.Subscribe with no method: %v, want ErrUnsupported", err)
	}
	if _, _, err := wn.Subscribe(ctx, "k", backend.Read); !errors.Is(err, backend.ErrUnsupported) {
		t.Errorf("WaitingNotifying.Subscribe with no method: %v, want ErrUnsupported", err)
	}
	type waits interface {
		Wait(context.Context, backend.Request) (backend.Grant, error)
	}
	type subscribes interface {
		Subscribe(context.Context, string, backend.Kind) (<-chan struct{}, func(), error)
	}
	if _, ok := any(n).(waits); ok {
		t.Error("Notifying has a Wait")
	}
	if _, ok := any(w).(subscribes); ok {
		t.Error("Waiting has a Subscribe")
	}
	if _, ok := any(wn).(interface {
		waits
		subscribes
	}); !ok {
		t.Error("WaitingNotifying has not both Wait and Subscribe")
	}
}
