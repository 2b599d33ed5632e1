package backend_test

import (
	"context"
	"strings"
	"testing"

	"github.com/distlock/distlock/backend"
)

type stubDriver struct{ caps backend.Capabilities }

func (d stubDriver) Capabilities() backend.Capabilities { return d.caps }
func (d stubDriver) TryAcquire(context.Context, backend.Request) (backend.Grant, error) {
	return backend.Grant{}, nil
}
func (d stubDriver) Close() error { return nil }

// stubNotifier announces releases of every kind.
type stubNotifier struct{ stubDriver }

func (stubNotifier) Subscribe(context.Context, string, backend.Kind) (<-chan struct{}, func(), error) {
	return nil, func() {}, nil
}
func (stubNotifier) Withdraw(context.Context, backend.Request) error { return nil }

// stubWaiter queues waiters of every kind.
type stubWaiter struct{ stubDriver }

func (stubWaiter) Wait(context.Context, backend.Request) (backend.Grant, error) {
	return backend.Grant{}, nil
}

// TestCapabilitiesCheck: one rule for every kind: notify needs Subscribe,
// queue needs Wait, an unknown wait kind is refused, and only the mutex
// must be granted.
func TestCapabilitiesCheck(t *testing.T) {
	caps := func(wait, sem, rw backend.WaitKind) backend.Capabilities {
		return backend.Capabilities{Name: "stub", Wait: wait, Lifetime: backend.LifetimeTTL, Semaphore: sem, RW: rw}
	}
	poll := backend.WaitPoll
	for _, tc := range []struct {
		name string
		d    backend.Driver
		want string // "" for no error
	}{
		{"mutex only", stubDriver{caps(poll, "", "")}, ""},
		{"every kind polls", stubDriver{caps(poll, poll, poll)}, ""},
		{"no mutex", stubDriver{caps("", poll, poll)}, `unknown wait kind ""`},
		{"unknown mutex wait", stubDriver{caps("sometimes", "", "")}, `unknown wait kind "sometimes"`},
		{"unknown rw wait", stubDriver{caps(poll, "", "sometimes")}, `unknown rw kind "sometimes"`},
		{"unknown semaphore wait", stubDriver{caps(poll, "often", "")}, `unknown semaphore kind "often"`},
		{"mutex notify without Subscribe", stubDriver{caps(backend.WaitNotify, "", "")}, "wait=notify but the driver is no Notifier"},
		{"rw notify without Subscribe", stubDriver{caps(poll, "", backend.WaitNotify)}, "rw=notify but the driver is no Notifier"},
		{"rw queue without Wait", stubNotifier{stubDriver{caps(poll, "", backend.WaitQueue)}}, "rw=queue but the driver has no Wait"},
		{"semaphore queue without Wait", stubDriver{caps(poll, backend.WaitQueue, "")}, "semaphore=queue but the driver has no Wait"},
		{"semaphore notify without Subscribe", stubWaiter{stubDriver{caps(backend.WaitQueue, backend.WaitNotify, "")}}, "semaphore=notify but the driver is no Notifier"},
		{"notify everywhere", stubNotifier{stubDriver{caps(backend.WaitNotify, backend.WaitNotify, backend.WaitNotify)}}, ""},
		{"queue everywhere", stubWaiter{stubDriver{caps(backend.WaitQueue, backend.WaitQueue, backend.WaitQueue)}}, ""},
	} {
		err := tc.d.Capabilities().Check(tc.d)
		switch {
		case tc.want == "" && err != nil:
			t.Errorf("%s: %v, want no error", tc.name, err)
		case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
			t.Errorf("%s: %v, want an error containing %q", tc.name, err, tc.want)
		}
	}
}

// stubInspector reads and frees locks.
type stubInspector struct{ stubDriver }

func (stubInspector) Inspect(context.Context, string, backend.Kind) (backend.Info, error) {
	return backend.Info{}, nil
}
func (stubInspector) List(context.Context, string, int) ([]backend.Info, error) { return nil, nil }
func (stubInspector) ForceRelease(context.Context, string, backend.Forced) (backend.Info, error) {
	return backend.Info{}, nil
}

// TestOffers: Inspect and ForceRelease, declared, are offered by an
// Inspector only, each as declared.
func TestOffers(t *testing.T) {
	for _, tc := range []struct {
		name                  string
		d                     backend.Driver
		inspect, forceRelease bool // declared
		wantInspect, wantFree bool
	}{
		{"no Inspector", stubDriver{}, true, true, false, false},
		{"Inspector declaring both", stubInspector{}, true, true, true, true},
		{"Inspector declaring ForceRelease only (Redlock)", stubInspector{}, false, true, false, true},
		{"Inspector declaring Inspect only", stubInspector{}, true, false, true, false},
	} {
		c := backend.Capabilities{Inspect: tc.inspect, ForceRelease: tc.forceRelease}.Offers(tc.d)
		if c.Inspect != tc.wantInspect || c.ForceRelease != tc.wantFree {
			t.Errorf("%s: Offers: Inspect %v, ForceRelease %v; want %v, %v", tc.name, c.Inspect, c.ForceRelease, tc.wantInspect, tc.wantFree)
		}
	}
}

func TestKinds(t *testing.T) {
	c := backend.Capabilities{Wait: backend.WaitQueue, RW: backend.WaitNotify, Semaphore: backend.WaitPoll}
	for k, want := range map[backend.Kind]backend.WaitKind{
		backend.Exclusive: backend.WaitQueue, backend.Read: backend.WaitNotify, backend.Write: backend.WaitNotify,
		backend.Permits: backend.WaitPoll, backend.Kind(9): "",
	} {
		if got := c.WaitFor(k); got != want {
			t.Errorf("WaitFor(%v) = %q, want %q", k, got, want)
		}
	}
	var s []string
	for _, k := range []backend.Kind{backend.Exclusive, backend.Read, backend.Write, backend.Permits, 9} {
		s = append(s, k.String())
	}
	if got := strings.Join(s, ","); got != "exclusive,read,write,permits,Kind(9)" {
		t.Errorf("Kind strings: %s", got)
	}
	err := backend.UnsupportedKind("stub", "acquire", backend.Permits)
	if !strings.Contains(err.Error(), "stub: acquire: unsupported: no permits grants") {
		t.Errorf("UnsupportedKind: %v", err)
	}
}

func TestPolled(t *testing.T) {
	c := backend.Capabilities{Name: "stub", Wait: backend.WaitQueue, Lifetime: backend.LifetimeTTL, RW: backend.WaitNotify, Fair: true, SemaphoreFair: true}
	p := c.Polled()
	if p.Wait != backend.WaitPoll || p.RW != backend.WaitPoll || p.Semaphore != "" || p.Fair || p.SemaphoreFair {
		t.Errorf("Polled() = %+v, want every granted kind polled, no semaphore, nothing fair", p)
	}
	if err := p.Check(stubDriver{p}); err != nil {
		t.Errorf("Polled capabilities refused for a driver with no optional interface: %v", err)
	}
}
