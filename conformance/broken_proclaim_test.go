package conformance_test

import (
	"context"
	"errors"

	"github.com/distlock/distlock/backend"
	"github.com/distlock/distlock/memlock"
)

// Broken drivers for ElectionProclaim (brokenDrivers): memlock's
// Announcer with one half broken, its waits polled.
func init() {
	brokenDrivers = append(brokenDrivers,
		brokenDriver{name: "proclaim-without-owner-check", wrap: wrapAnnouncer(proclaimUnchecked, nil), mustFail: []string{"ElectionProclaim"}},
		brokenDriver{name: "watch-never-pushes", wrap: wrapAnnouncer(nil, watchSilent), mustFail: []string{"ElectionProclaim"}},
	)
}

// announcer forwards memlock's Inspector and Announcer, with SetValue or
// Watch replaced where set.
type announcer struct {
	backend.Driver
	d        *memlock.Driver
	setValue func(a *announcer, ctx context.Context, l backend.Lock, value string) error
	watch    func(a *announcer, ctx context.Context, key string) (<-chan struct{}, func(), error)
}

func wrapAnnouncer(
	setValue func(a *announcer, ctx context.Context, l backend.Lock, value string) error,
	watch func(a *announcer, ctx context.Context, key string) (<-chan struct{}, func(), error),
) func(*memlock.Store, backend.Driver) backend.Driver {
	return func(_ *memlock.Store, d backend.Driver) backend.Driver {
		return &announcer{Driver: d, d: d.(*lossy).mem(), setValue: setValue, watch: watch}
	}
}

func (a *announcer) Capabilities() backend.Capabilities { return a.Driver.Capabilities().Polled() }

func (a *announcer) Inspect(ctx context.Context, key string, kind backend.Kind) (backend.Info, error) {
	return a.d.Inspect(ctx, key, kind)
}

func (a *announcer) List(ctx context.Context, prefix string, limit int) ([]backend.Info, error) {
	return a.d.List(ctx, prefix, limit)
}

func (a *announcer) ForceRelease(ctx context.Context, key string, f backend.Forced) (backend.Info, error) {
	return a.d.ForceRelease(ctx, key, f)
}

func (a *announcer) SetValue(ctx context.Context, l backend.Lock, value string) error {
	switch x := l.(type) { // memlock's own lock, under the harness's wrappers
	case *lossyLock:
		l = x.Lock
	case *lossyDoubt:
		l = x.Lock
	}
	if a.setValue != nil {
		return a.setValue(a, ctx, l, value)
	}
	return a.d.SetValue(ctx, l, value)
}

func (a *announcer) Watch(ctx context.Context, key string) (<-chan struct{}, func(), error) {
	if a.watch != nil {
		return a.watch(a, ctx, key)
	}
	return a.d.Watch(ctx, key)
}

// proclaimUnchecked answers success where the store refused: a deposed
// leader believes it proclaimed.
func proclaimUnchecked(a *announcer, ctx context.Context, l backend.Lock, value string) error {
	if err := a.d.SetValue(ctx, l, value); err != nil && !errors.Is(err, backend.ErrNotHeld) {
		return err
	}
	return nil
}

// watchSilent confirms a watch that never reports a change.
func watchSilent(*announcer, context.Context, string) (<-chan struct{}, func(), error) {
	return make(chan struct{}), func() {}, nil
}
