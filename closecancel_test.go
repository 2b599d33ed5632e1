package distlock_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/distlock/distlock"
	"github.com/distlock/distlock/backend"
	"github.com/distlock/distlock/internal/testctx"
	"github.com/distlock/distlock/memlock"
)

// cancelLosesDriver's locks are lost when a Refresh's ctx ends while the
// renewal is in flight, as an SQL lock is: the abandoned statement leaves
// its connection in an unknown state, the driver closes it (freeing the
// row) and reports the loss through OnLost.
type cancelLosesDriver struct {
	backend.Driver
	refreshing chan struct{} // a Refresh has started
	// badConn: the loss names only its effect, as database/sql does for a
	// statement its ctx interrupted ("driver: bad connection"), not the
	// ctx's cancellation.
	badConn bool
	// stallKey, if set: an acquisition of that key stays in the driver
	// (announcing itself on stalled) until a Refresh has reported its loss
	// (reported closed), whatever its ctx says. Close waits for the
	// operations in flight before it ends any hold, so the loss reaches
	// the Locker after Close has begun and before it ends the hold.
	stallKey string
	stalled  chan struct{}
	reported chan struct{}
	report   sync.Once
	// cause is the cause of the ctx end that made a Refresh give up.
	cause atomic.Pointer[error]
}

func (d *cancelLosesDriver) TryAcquire(ctx context.Context, req backend.Request) (backend.Grant, error) {
	if d.stallKey != "" && req.Key == d.stallKey {
		close(d.stalled)
		select {
		case <-d.reported:
		case <-time.After(10 * time.Second): // bounded: the test fails on its own
		}
	}
	return tryAcquireThen(ctx, d.Driver, req, func(g *backend.Grant) { g.Lock = &cancelLosesLock{Lock: g.Lock, d: d, onLost: req.OnLost} })
}

type cancelLosesLock struct {
	backend.Lock
	d      *cancelLosesDriver
	onLost func(error)
	lost   atomic.Bool
}

func (l *cancelLosesLock) Refresh(ctx context.Context, ttl time.Duration) error {
	select {
	case l.d.refreshing <- struct{}{}:
	default:
	}
	<-ctx.Done()
	cause0 := context.Cause(ctx)
	l.d.cause.Store(&cause0)
	l.lost.Store(true)
	_ = l.Lock.Release(context.Background())
	cause := ctx.Err()
	if l.d.badConn {
		cause = errors.New("driver: bad connection")
	}
	err := fmt.Errorf("cancelloses: refresh: %w: its connection failed: %w", backend.ErrNotHeld, cause)
	if l.onLost != nil {
		l.onLost(err)
	}
	if l.d.reported != nil {
		l.d.report.Do(func() { close(l.d.reported) })
	}
	return err
}

func (l *cancelLosesLock) Release(ctx context.Context) error {
	if l.lost.Load() {
		return fmt.Errorf("cancelloses: release: %w", backend.ErrNotHeld)
	}
	return l.Lock.Release(ctx)
}

// pollDriver is a driver of a new memlock store whose waits poll.
func pollDriver(t *testing.T) backend.Driver {
	t.Helper()
	inner, err := memlock.NewStore().NewDriver(&memlock.Options{Wait: backend.WaitPoll})
	if err != nil {
		t.Fatal(err)
	}
	return inner
}

// acquireK returns a new Locker over d (which the test closes), a
// context of 30 s (canceled when t ends) and the Locker's lease of "k"
// for a second, acquired with it.
func acquireK(t *testing.T, d backend.Driver) (*distlock.Locker, context.Context, *distlock.Lease) {
	t.Helper()
	l := distlock.New(d)
	ctx := testctx.For(t, 30*time.Second)
	le, err := l.Acquire(ctx, "k", distlock.WithTTL(time.Second))
	if err != nil {
		t.Fatal(err)
	}
	return l, ctx, le
}

// TestCloseDuringRenewal: a Locker closed while a lease's renewal is in
// flight ends that lease as it ends every other, released by the close
// (ErrReleased), even when canceling the renewal is what freed the lock
// in the store; it is not reported lost, which would tell the holder that
// another may have had the lock while it thought it held it. (Seen on
// SQL: conformance Close failed once with "lost ... context canceled", and
// on PostgreSQL with "lost ... driver: bad connection", which does not
// name the cancellation: the badconn case.)
func TestCloseDuringRenewal(t *testing.T) {
	for _, badConn := range []bool{false, true} {
		t.Run(fmt.Sprintf("badconn=%v", badConn), func(t *testing.T) { testCloseDuringRenewal(t, badConn) })
	}
}

func testCloseDuringRenewal(t *testing.T, badConn bool) {
	synctest.Test(t, func(t *testing.T) {
		inner := pollDriver(t)
		d := &cancelLosesDriver{Driver: inner, refreshing: make(chan struct{}, 1), badConn: badConn}
		l, ctx, le := acquireK(t, d)
		select {
		case <-d.refreshing:
		case <-ctx.Done():
			t.Fatal("no renewal started")
		}
		if err := l.Close(); err != nil {
			t.Fatalf("Close: %v", err)
		}
		<-le.Done()
		if err := le.Err(); !errors.Is(err, distlock.ErrReleased) || errors.Is(err, distlock.ErrLost) {
			t.Errorf("lease after Close during its renewal: %v, want ErrReleased and not ErrLost", err)
		}
	})
}

// TestCloseDuringRenewalLossInWindow: a loss the driver reports after
// Close has begun but before Close has ended the hold (the renewal Close
// canceled failed with "driver: bad connection", as PostgreSQL's does,
// not with context.Canceled) still ends the lease released, not lost:
// Close promises ErrReleased for every lease it ends. An acquisition held
// in the driver until the loss is reported keeps Close (which waits for
// operations in flight before it releases anything) from ending the hold
// first, so the loss lands in that window every run. Before the fix only a
// loss naming context.Canceled was ignored there, and this lease was lost.
func TestCloseDuringRenewalLossInWindow(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		inner := pollDriver(t)
		d := &cancelLosesDriver{
			Driver: inner, refreshing: make(chan struct{}, 1), badConn: true,
			stallKey: "stall", stalled: make(chan struct{}), reported: make(chan struct{}),
		}
		l, ctx, le := acquireK(t, d)
		stallErr := make(chan error, 1)
		go func() {
			_, err := l.TryAcquire(ctx, "stall")
			stallErr <- err
		}()
		for _, c := range []struct {
			ch   <-chan struct{}
			what string
		}{{d.stalled, "the stalled acquisition did not reach the driver"}, {d.refreshing, "no renewal started"}} {
			select {
			case <-c.ch:
			case <-ctx.Done():
				t.Fatal(c.what)
			}
		}
		if err := l.Close(); err != nil {
			t.Fatalf("Close: %v", err)
		}
		if err := <-stallErr; err == nil {
			t.Error("the acquisition in flight during Close got a lease")
		}
		if c := d.cause.Load(); c == nil || !errors.Is(*c, distlock.ErrClosed) {
			t.Fatal("the renewal did not end by Close: the loss missed the window under test")
		}
		<-le.Done()
		if err := le.Err(); !errors.Is(err, distlock.ErrReleased) || errors.Is(err, distlock.ErrLost) {
			t.Errorf("lease whose renewal reported a loss after Close began: %v, want ErrReleased and not ErrLost", err)
		}
	})
}
