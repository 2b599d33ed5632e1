package conformance_test

import (
	"context"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/distlock/distlock/backend"
	"github.com/distlock/distlock/conformance"
	"github.com/distlock/distlock/memlock"
)

// The suite must be able to fail. Each broken driver below wraps memlock
// with one classic bug; the suite, run against it in a child process, must
// fail, and in the cases named.
var brokenDrivers = []struct {
	name     string
	wrap     func(s *memlock.Store, d backend.Driver) backend.Driver
	mustFail []string
}{
	{
		name:     "release-without-owner-check",
		wrap:     func(s *memlock.Store, d backend.Driver) backend.Driver { return &noOwnerCheck{Driver: d, s: s} },
		mustFail: []string{"OwnerCheckedRelease", "DoubleRelease"},
	},
	{
		name:     "repeated-tokens",
		wrap:     func(_ *memlock.Store, d backend.Driver) backend.Driver { return &constToken{Driver: d} },
		mustFail: []string{"FencingTokens"},
	},
	{
		name:     "overlapping-holds",
		wrap:     func(_ *memlock.Store, d backend.Driver) backend.Driver { return &grantAlways{Driver: d} },
		mustFail: []string{"MutualExclusion", "TryAcquireOneWinner"},
	},
	{
		name:     "refresh-without-owner-check",
		wrap:     func(_ *memlock.Store, d backend.Driver) backend.Driver { return &refreshAlways{Driver: d} },
		mustFail: []string{"OwnerCheckedRefresh", "LossDetected"},
	},
}

const brokenEnv = "DISTLOCK_CONFORMANCE_BROKEN"

func TestSuiteCatchesBrokenDrivers(t *testing.T) {
	if name := os.Getenv(brokenEnv); name != "" {
		runBroken(t, name)
		return
	}
	if testing.Short() {
		t.Skip("runs the suite in child processes")
	}
	for _, b := range brokenDrivers {
		t.Run(b.name, func(t *testing.T) {
			t.Parallel()
			pattern := "^TestSuiteCatchesBrokenDrivers$/^(" + strings.Join(b.mustFail, "|") + ")$"
			cmd := exec.Command(os.Args[0], "-test.run="+pattern, "-test.v", "-test.timeout=5m")
			cmd.Env = append(os.Environ(), brokenEnv+"="+b.name)
			out, err := cmd.CombinedOutput()
			if err == nil {
				t.Fatalf("the suite passed a driver with %s:\n%s", b.name, out)
			}
			for _, c := range b.mustFail {
				if !strings.Contains(string(out), "--- FAIL: TestSuiteCatchesBrokenDrivers/"+c+" ") {
					t.Errorf("case %s did not catch %s; output:\n%s", c, b.name, out)
				}
			}
		})
	}
}

func runBroken(t *testing.T, name string) {
	for _, b := range brokenDrivers {
		if b.name != name {
			continue
		}
		s := memlock.NewStore()
		conformance.Run(t, func(context.Context, *testing.T) (conformance.Harness, error) {
			return &brokenHarness{s: s, wrap: b.wrap}, nil
		})
		return
	}
	t.Fatalf("unknown broken driver %q", name)
}

type brokenHarness struct {
	s    *memlock.Store
	wrap func(*memlock.Store, backend.Driver) backend.Driver
}

func (h *brokenHarness) NewDriver(context.Context) (backend.Driver, error) {
	d, err := h.s.NewDriver(nil)
	if err != nil {
		return nil, err
	}
	return h.wrap(h.s, d), nil
}
func (h *brokenHarness) TTL() time.Duration { return 300 * time.Millisecond }
func (h *brokenHarness) Kill(_ context.Context, d backend.Driver) error {
	d.(interface{ inner() backend.Driver }).inner().(*memlock.Driver).Kill()
	return nil
}
func (h *brokenHarness) Delete(_ context.Context, key string) error { h.s.Delete(key); return nil }
func (h *brokenHarness) Close() error                               { return nil }

// noOwnerCheck releases by deleting the key, whoever holds it.
type noOwnerCheck struct {
	backend.Driver
	s *memlock.Store
}

func (d *noOwnerCheck) inner() backend.Driver { return d.Driver }
func (d *noOwnerCheck) Subscribe(ctx context.Context, key string) (<-chan struct{}, func(), error) {
	return d.Driver.(backend.Notifier).Subscribe(ctx, key)
}
func (d *noOwnerCheck) TryAcquire(ctx context.Context, req backend.Request) (backend.Grant, error) {
	g, err := d.Driver.TryAcquire(ctx, req)
	if err == nil {
		g.Lock = &deleteLock{Lock: g.Lock, s: d.s, key: req.Key}
	}
	return g, err
}

type deleteLock struct {
	backend.Lock
	s   *memlock.Store
	key string
}

func (l *deleteLock) Release(context.Context) error { l.s.Delete(l.key); return nil }

// constToken hands out the same fencing token every time.
type constToken struct{ backend.Driver }

func (d *constToken) inner() backend.Driver { return d.Driver }
func (d *constToken) Subscribe(ctx context.Context, key string) (<-chan struct{}, func(), error) {
	return d.Driver.(backend.Notifier).Subscribe(ctx, key)
}
func (d *constToken) TryAcquire(ctx context.Context, req backend.Request) (backend.Grant, error) {
	g, err := d.Driver.TryAcquire(ctx, req)
	g.Token = 1
	return g, err
}

// grantAlways grants even when another owner holds the key.
type grantAlways struct{ backend.Driver }

func (d *grantAlways) inner() backend.Driver { return d.Driver }
func (d *grantAlways) Subscribe(ctx context.Context, key string) (<-chan struct{}, func(), error) {
	return d.Driver.(backend.Notifier).Subscribe(ctx, key)
}
func (d *grantAlways) TryAcquire(ctx context.Context, req backend.Request) (backend.Grant, error) {
	g, err := d.Driver.TryAcquire(ctx, req)
	if err != nil && strings.Contains(err.Error(), "held by another owner") {
		return backend.Grant{Lock: nopLock{}, Token: 1 << 40}, nil
	}
	return g, err
}

type nopLock struct{}

func (nopLock) Refresh(context.Context, time.Duration) error { return nil }
func (nopLock) Release(context.Context) error                { return nil }

// refreshAlways reports success for every refresh, held or not.
type refreshAlways struct{ backend.Driver }

func (d *refreshAlways) inner() backend.Driver { return d.Driver }
func (d *refreshAlways) Subscribe(ctx context.Context, key string) (<-chan struct{}, func(), error) {
	return d.Driver.(backend.Notifier).Subscribe(ctx, key)
}
func (d *refreshAlways) TryAcquire(ctx context.Context, req backend.Request) (backend.Grant, error) {
	g, err := d.Driver.TryAcquire(ctx, req)
	if err == nil {
		g.Lock = refreshOK{g.Lock}
	}
	return g, err
}

type refreshOK struct{ backend.Lock }

func (refreshOK) Refresh(context.Context, time.Duration) error { return nil }
