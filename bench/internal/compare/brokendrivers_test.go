package compare

import (
	"context"
	"errors"
	"time"

	"github.com/distlock/distlock"
	"github.com/distlock/distlock/backend"
	"github.com/distlock/distlock/bench/internal/compare/fakes"
	"github.com/distlock/distlock/bench/internal/measure"
	"github.com/distlock/distlock/memlock"
)

// The engine's tests reach the backend's driver interfaces here only:
// drivers that lack a primitive, or break it, so that a workload's
// "unsupported" and its safety checks are seen to work.

// memTarget is distlock on the in-process store named store.
func memTarget(name, store string) Target {
	return Target{Name: name, URL: "mem://" + store, Crash: fakes.MemCrash(store)}
}

// lockerTarget is a distlock target made by New over a memlock driver
// that wrap may change.
func lockerTarget(name, store string, wrap func(*memlock.Driver) backend.Driver) Target {
	return Target{Name: name, Store: name, URL: "mem://" + store,
		New: func(_ context.Context, ttl time.Duration) (measure.Contender, error) {
			d, err := memlock.Named(store).NewDriver(&memlock.Options{Wait: backend.WaitPoll})
			if err != nil {
				return nil, err
			}
			return lockerContender{distlock.New(wrap(d), distlock.WithDefaultTTL(ttl))}, nil
		}}
}

// noSemaphore is memlock declaring no semaphore and no read-write lock: a
// backend that offers neither.
type noSemaphore struct{ backend.Driver }

func (d noSemaphore) Capabilities() backend.Capabilities {
	c := d.Driver.Capabilities()
	c.Semaphore, c.RW = "", ""
	return c
}

// ignoresLimit grants permits whatever the limit: a broken semaphore.
type ignoresLimit struct{ *memlock.Driver }

func (d ignoresLimit) TryAcquire(ctx context.Context, req backend.Request) (backend.Grant, error) {
	if req.Kind == backend.Permits {
		req.Limit = backend.MaxSemaphoreLimit
	}
	return d.Driver.TryAcquire(ctx, req)
}

// writesOverReaders grants a refused write anyway: a broken read-write
// lock.
type writesOverReaders struct{ *memlock.Driver }

func (d writesOverReaders) TryAcquire(ctx context.Context, req backend.Request) (backend.Grant, error) {
	g, err := d.Driver.TryAcquire(ctx, req)
	if req.Kind == backend.Write && errors.Is(err, backend.ErrNotAcquired) {
		return backend.Grant{Lock: freeLock{}, Token: 1 << 40}, nil
	}
	return g, err
}

// freeLock is a grant the store never made.
type freeLock struct{}

func (freeLock) Refresh(context.Context, time.Duration) error { return nil }
func (freeLock) Release(context.Context) error                { return nil }
