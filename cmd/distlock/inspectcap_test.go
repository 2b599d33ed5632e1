package main

import (
	"bytes"
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/distlock/distlock"
	"github.com/distlock/distlock/backend"
	"github.com/distlock/distlock/memlock"
)

// undeclaredInspect is memlock's driver declaring, as Redlock does, that
// it cannot read a lock's state (no Capabilities.Inspect), though it is a
// backend.Inspector (for its ForceRelease); it counts its Inspect and
// List calls.
type undeclaredInspect struct {
	*memlock.Driver
	calls *atomic.Int32
}

func (d undeclaredInspect) Capabilities() backend.Capabilities {
	c := d.Driver.Capabilities()
	c.Name, c.Inspect = "noinspect", false
	return c
}

func (d undeclaredInspect) Inspect(ctx context.Context, key string, kind backend.Kind) (backend.Info, error) {
	d.calls.Add(1)
	return d.Driver.Inspect(ctx, key, kind)
}

func (d undeclaredInspect) List(ctx context.Context, prefix string, limit int) ([]backend.Info, error) {
	d.calls.Add(1)
	return d.Driver.List(ctx, prefix, limit)
}

var undeclaredCalls atomic.Int32

func init() {
	s := memlock.NewStore()
	backend.Register("noinspect", func(context.Context, *backend.URL) (backend.Driver, error) {
		d, err := s.NewDriver(nil)
		if err != nil {
			return nil, err
		}
		return undeclaredInspect{Driver: d, calls: &undeclaredCalls}, nil
	})
}

// TestStatusUndeclaredInspect: status (of every kind) and list go by
// Capabilities.Inspect: on a backend that declares none they exit 64
// ("unsupported by the noinspect backend") without calling Inspect or
// List.
func TestStatusUndeclaredInspect(t *testing.T) {
	o := queryOpts{url: "noinspect://x", timeout: 10 * time.Second}
	ctx := context.Background()
	var out bytes.Buffer
	for name, run := range map[string]func() error{
		"status":             func() error { return status(ctx, &out, o, "k") },
		"status --semaphore": func() error { return semaphoreStatus(ctx, &out, o, "k") },
		"status --rw":        func() error { return rwStatus(ctx, &out, o, "k") },
		"list":               func() error { return list(ctx, &out, o, "", 0) },
	} {
		err := run()
		if code := classify(err); code != ExitUsage || !errors.Is(err, distlock.ErrUnsupported) || !strings.Contains(err.Error(), "unsupported by the noinspect backend") {
			t.Errorf("%s: %v (exit %d), want exit %d: unsupported by the noinspect backend", name, err, code, ExitUsage)
		}
	}
	if n := undeclaredCalls.Load(); n != 0 {
		t.Errorf("Inspect or List called %d times on a backend that declares no Inspect", n)
	}
}
