package conformance_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/distlock/distlock/backend"
	"github.com/distlock/distlock/internal/shim"
	"github.com/distlock/distlock/memlock"
)

// The broken driver for PartitionedHolderReacquires (brokenDrivers):
// zklock's defect before 22ce45c, on memlock. Locks live as long as the
// driver's "session" (it renews them itself); once a call found the store
// unreachable the driver takes its session for expired, but learns it
// only a moment after the next grant, which it takes for one of the old
// session's: it reports that lock lost, marks it gone, and its Release
// then frees nothing, while the session goes on keeping the lock.
func init() {
	brokenDrivers = append(brokenDrivers, brokenDriver{
		name:     "lock-after-heal-kept-by-its-session",
		wrap:     func(_ *memlock.Store, d backend.Driver) backend.Driver { return newStaleSession(d) },
		mustFail: []string{"PartitionedHolderReacquires"},
	})
}

type staleSession struct {
	shim.Notifier
	cut     atomic.Bool   // a call found the store unreachable since the last grant
	closing chan struct{} // closed by Close: the session's keepers stop
	once    sync.Once
	keepers sync.WaitGroup
}

func newStaleSession(d backend.Driver) *staleSession {
	return &staleSession{Notifier: shim.Notifier{Driver: d}, closing: make(chan struct{})}
}

func (d *staleSession) unreachable(err error) error {
	if errors.Is(err, backend.ErrUnavailable) {
		d.cut.Store(true)
	}
	return err
}

func (d *staleSession) TryAcquire(ctx context.Context, req backend.Request) (backend.Grant, error) {
	g, err := d.Driver.TryAcquire(ctx, req)
	if err != nil {
		return g, d.unreachable(err)
	}
	l := &sessionLock{Lock: g.Lock, d: d, stop: make(chan struct{})}
	g.Lock = l
	d.keepers.Go(func() { l.keep(req.TTL) })
	if d.cut.Swap(false) {
		// The expiry, seen a moment after this grant, ends this lock too.
		time.AfterFunc(req.TTL/10, func() {
			l.gone.Store(true)
			if req.OnLost != nil {
				req.OnLost(fmt.Errorf("%w: session expired", backend.ErrLost))
			}
		})
	}
	return g, nil
}

func (d *staleSession) Close() error {
	d.once.Do(func() { close(d.closing) })
	d.keepers.Wait()
	return d.Driver.Close()
}

// sessionLock is a lock its session keeps (keep) until its Release, which
// frees nothing once the lock is marked gone.
type sessionLock struct {
	backend.Lock
	d        *staleSession
	gone     atomic.Bool
	stop     chan struct{}
	stopOnce sync.Once
}

func (l *sessionLock) keep(ttl time.Duration) {
	for {
		select {
		case <-l.stop:
			return
		case <-l.d.closing:
			return
		case <-time.After(ttl / 3):
			_ = l.Lock.Refresh(context.Background(), ttl)
		}
	}
}

func (l *sessionLock) Refresh(ctx context.Context, ttl time.Duration) error {
	if l.gone.Load() {
		return fmt.Errorf("%w: session expired", backend.ErrNotHeld)
	}
	return l.d.unreachable(l.Lock.Refresh(ctx, ttl))
}

func (l *sessionLock) Release(ctx context.Context) error {
	if l.gone.Load() {
		return nil // "gone with its session": nothing asked of the store
	}
	l.stopOnce.Do(func() { close(l.stop) })
	return l.d.unreachable(l.Lock.Release(ctx))
}
