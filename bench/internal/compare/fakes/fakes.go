// Package fakes holds stand-ins for the engine's and the report's tests: a
// peer library (a channel as a lock), a floor with nothing behind it, and
// the crash of an in-process mem store's holder. It imports neither the
// engine nor the report, so that the tests of both can use it.
package fakes

import (
	"context"
	"sync"
	"time"

	"github.com/distlock/distlock"
	"github.com/distlock/distlock/memlock"
)

// ChanLock is one lock for every key: a channel of one slot. It is a
// measure.Contender.
type ChanLock struct {
	slot    chan struct{}
	expires sync.WaitGroup
}

// NewChanLock returns a free ChanLock.
func NewChanLock() *ChanLock { return &ChanLock{slot: make(chan struct{}, 1)} }

// Acquire takes the slot, or returns ctx's error.
func (l *ChanLock) Acquire(ctx context.Context, _ string) (func(context.Context) error, error) {
	select {
	case l.slot <- struct{}{}:
		return func(context.Context) error { <-l.slot; return nil }, nil
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// Close does nothing.
func (l *ChanLock) Close() {}

// Crash takes the lock and "dies": its lease expires after ttl.
func (l *ChanLock) Crash(ctx context.Context, key string, ttl time.Duration) (time.Time, error) {
	release, err := l.Acquire(ctx, key)
	if err != nil {
		return time.Time{}, err
	}
	l.expires.Go(func() {
		time.Sleep(ttl) // the lease running out
		_ = release(context.Background())
	})
	return time.Now(), nil
}

// Wait waits until every crashed holder's lease ran out.
func (l *ChanLock) Wait() { l.expires.Wait() }

// Noop is a floor with nothing behind it.
type Noop struct{}

// Acquire returns at once.
func (Noop) Acquire(context.Context, string) (func(context.Context) error, error) {
	return func(context.Context) error { return nil }, nil
}

// Close does nothing.
func (Noop) Close() {}

// MemCrash returns a Target.Crash for the in-process store named store:
// a holder takes the key, then its driver is killed, as if its process
// died: the store keeps the lock until the TTL.
func MemCrash(store string) func(ctx context.Context, key string, ttl time.Duration) (time.Time, error) {
	return func(ctx context.Context, key string, ttl time.Duration) (time.Time, error) {
		d, err := memlock.Named(store).NewDriver(nil)
		if err != nil {
			return time.Time{}, err
		}
		l := distlock.New(d, distlock.WithDefaultTTL(ttl))
		defer l.Close()
		if _, err := l.Acquire(ctx, key); err != nil {
			return time.Time{}, err
		}
		d.Kill()
		return time.Now(), nil
	}
}
