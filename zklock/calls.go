package zklock

// The driver's calls to go-zookeeper: the watches they set, the
// goroutines they run on (do, bounded by a ctx go-zookeeper does not
// take), and how their errors map to distlock's kinds.

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"

	"github.com/go-zookeeper/zk"

	"github.com/distlock/distlock/backend"
)

// watchSet counts a watch about to be set (before the request that sets
// it); watchGone counts one that fired or was never set. See session.
func (d *Driver) watchSet()  { d.sess.watches.Add(1) }
func (d *Driver) watchGone() { d.sess.watches.Add(-1) }

// drainWatch waits, on a driver goroutine, for a watch nobody listens to
// any more, so that the count stays exact.
func (d *Driver) drainWatch(w <-chan zk.Event) {
	if w == nil {
		return
	}
	d.goTracked(func() {
		select {
		case <-w:
			d.watchGone()
		case <-d.closing:
		}
	})
}

// settleWatch accounts for a watch the driver will not listen to: one never
// set (err != nil) or one to drain.
func (d *Driver) settleWatch(w <-chan zk.Event, err error) {
	if err != nil || w == nil {
		d.watchGone()
		return
	}
	d.drainWatch(w)
}

// goTracked runs f on a goroutine Close waits for; false once closed.
func (d *Driver) goTracked(f func()) bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.closed {
		return false
	}
	d.wg.Go(f)
	return true
}

// do runs f, a blocking go-zookeeper call, honouring ctx: if ctx ends
// first, do returns its cause at once and f finishes on a goroutine of its
// own (go-zookeeper bounds a request sent by its receive timeout, 2/3 of
// the session timeout; Close does not wait for it on a connection passed
// to New). The caller must not touch what f writes unless do returned nil.
//
// While the connection has no session, do fails at once with
// errDisconnected instead of queueing the request: the outcome is the same
// (the portable layer retries with backoff), and no request is in flight
// when go-zookeeper re-establishes the session and re-registers its watches
// (its Conn.lastZxid is read and written there without synchronisation;
// go-zookeeper PR #35, unmerged as of v1.0.4).
func (d *Driver) do(ctx context.Context, f func()) error {
	if ctx.Err() != nil {
		return context.Cause(ctx)
	}
	if d.conn.State() != zk.StateHasSession {
		d.sess.gen.Add(1) // whatever the connection was, the next one is another
		return errDisconnected
	}
	if ctx.Done() == nil {
		f()
		return nil
	}
	done := make(chan struct{})
	d.mu.Lock()
	if d.closed {
		d.mu.Unlock()
		return backend.ErrClosed
	}
	d.calls.Go(func() { defer close(done); f() })
	d.mu.Unlock()
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		select {
		case <-done: // finished too: use the result
			return nil
		default:
			return context.Cause(ctx)
		}
	}
}

// errDisconnected reports a call not sent because the connection has no
// session at the moment.
var errDisconnected = errors.New("not connected to ZooKeeper (no session)")

// handoff decides who handles the outcome of a call run by do: the caller,
// or (once the caller gave up on ctx) the call itself.
type handoff struct{ state atomic.Int32 }

// done is called by the call when it finished: true if the caller takes
// the outcome, false if the caller gave up and the call must clean up.
func (h *handoff) done() bool { return h.state.CompareAndSwap(0, 1) }

// abandon is called by the caller when do failed: true if the call has not
// finished (it will clean up), false if it finished and the caller must
// use its outcome after all.
func (h *handoff) abandon() bool { return h.state.CompareAndSwap(0, 2) }

// kind returns the distlock error kind for a go-zookeeper error.
func kind(err error) error {
	switch {
	case errors.Is(err, zk.ErrSessionExpired):
		return backend.ErrLost
	case errors.Is(err, zk.ErrClosing):
		return backend.ErrClosed
	case errors.Is(err, zk.ErrNoAuth), errors.Is(err, zk.ErrAuthFailed), errors.Is(err, zk.ErrInvalidACL):
		return backend.ErrInvalidConfig
	default:
		return backend.ErrUnavailable
	}
}

// ambiguous reports whether a request that failed with err may have been
// applied by the server (its reply was lost with the connection).
func ambiguous(err error) bool {
	return errors.Is(err, zk.ErrConnectionClosed) || errors.Is(err, zk.ErrSessionMoved) || errors.Is(err, zk.ErrClosing)
}

// failure wraps a go-zookeeper error (or a context error) for op on key.
func failure(op, key string, err error) error {
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) || errors.Is(err, backend.ErrClosed) || errors.Is(err, backend.ErrLost) {
		return fmt.Errorf("zklock: %s %q: %w", op, key, err)
	}
	return fmt.Errorf("zklock: %s %q: %w: %w", op, key, kind(err), err)
}
