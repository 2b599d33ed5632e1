package distlock_test

import (
	"context"
	"errors"
	"testing"
	"testing/synctest"
	"time"

	"github.com/distlock/distlock"
	"github.com/distlock/distlock/backend"
	"github.com/distlock/distlock/internal/shim"
	"github.com/distlock/distlock/memlock"
)

// slowReplyDriver's Refreshes take effect in the store at once, and their
// reply reaches the client only when the test opens gate.
type slowReplyDriver struct {
	shim.Notifier
	refreshed chan struct{} // a Refresh took effect
	gate      chan struct{}
}

func (d *slowReplyDriver) TryAcquire(ctx context.Context, req backend.Request) (backend.Grant, error) {
	return tryAcquireThen(ctx, d.Driver, req, func(g *backend.Grant) { g.Lock = &slowReplyLock{Lock: g.Lock, d: d} })
}

type slowReplyLock struct {
	backend.Lock
	d *slowReplyDriver
}

func (l *slowReplyLock) Refresh(ctx context.Context, ttl time.Duration) error {
	err := l.Lock.Refresh(ctx, ttl)
	l.d.refreshed <- struct{}{}
	select {
	case <-l.d.gate:
	case <-time.After(10 * time.Second): // bounded: the test fails on its own
	}
	return err
}

// TestRefreshAnsweredAfterLoss: a Refresh whose reply arrives after the
// lease was lost (its validity ran out while the reply was on its way,
// and the Locker released the lock) reports the loss. It used to return
// nil, telling the caller its lease was extended while it had ended and
// its lock had been freed in the store.
func TestRefreshAnsweredAfterLoss(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		store := memlock.NewStore()
		inner, err := store.NewDriver(nil)
		if err != nil {
			t.Fatal(err)
		}
		d := &slowReplyDriver{Notifier: shim.Notifier{Driver: inner}, refreshed: make(chan struct{}, 1), gate: make(chan struct{})}
		l := distlock.New(d)
		defer l.Close()
		le, err := l.TryAcquire(ctx, "k", distlock.WithTTL(100*time.Millisecond), distlock.WithoutAutoRenew())
		if err != nil {
			t.Fatal(err)
		}
		refreshed := make(chan error, 1)
		go func() { refreshed <- le.Refresh(ctx, 0) }()
		<-d.refreshed
		select {
		case <-le.Done():
		case <-time.After(5 * time.Second):
			t.Fatal("the lease did not end at its deadline")
		}
		// The Locker releases a lost lease's lock (in the background).
		for i := 0; store.Len() != 0 && i < 200; i++ {
			time.Sleep(5 * time.Millisecond)
		}
		close(d.gate)
		if err := <-refreshed; !errors.Is(err, distlock.ErrLost) {
			t.Errorf("Refresh answered after the lease was lost (store holds %d locks) = %v, want ErrLost", store.Len(), err)
		}
	})
}
