package redislock

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/distlock/distlock/internal/redisproto"
)

// What a go-redis client does with a call's ctx (v9): it waits for a
// connection from its pool, dials, and sleeps between retries only until
// ctx ends, but it bounds a read or write on a connection by ctx only with
// ContextTimeoutEnabled, and then only by ctx's deadline, never by its
// cancellation. Otherwise a read waits its ReadTimeout (go-redis's default
// is 5 s; none when ReadTimeout is -1, and with -2, which disables read
// deadlines, not even ContextTimeoutEnabled bounds it), whatever ctx says.
// A connection whose read timed out is closed, so a reply that comes
// later is never read as another call's; one whose reply comes in time
// goes back to the pool.
//
// The driver's calls return by their ctx's deadline all the same: on a
// client that would not end a call then, each call with a deadline runs on
// a goroutine of its own, and the driver stops waiting for it when the
// deadline passes or ctx is cancelled (await). The
// call goes on until go-redis returns it (the server's reply, or the
// ReadTimeout); its connection stays busy until then, and a grant it
// brings back late is given back (the acquire paths' late handlers).

// abandonedError is a call the driver stopped waiting for because its ctx
// ended while the client went on with it.
type abandonedError struct{ cause error }

func (e *abandonedError) Error() string {
	return fmt.Sprintf("no answer before the call's context ended; the client goes on with it in the background (it does not end calls at their context's end: see redislock.New): %v", e.cause)
}

func (e *abandonedError) Unwrap() error { return e.cause }

// await returns call's result, or an *abandonedError when ctx's deadline
// passes first on a client that would not end the call then
// (redisproto.ClientBounds.detach). The call then goes on on its goroutine, and
// late, if not nil, gets its result when it ends: before await returns if
// that is within grace after ctx's end (an acquisition waits redisproto.CleanupTimeout
// for it, so that what it may have taken is given back before it returns,
// as on a client that ends the call itself), else in the background. A
// ctx without a deadline is not awaited: call runs on the caller's
// goroutine. call must use ctx for its go-redis calls: go-redis still
// ends its pool waits, dials and retries by it.
func await[T any](d *Driver, ctx context.Context, call func() (T, error), late func(T, error), grace time.Duration) (T, error) {
	if !d.awaits(ctx) {
		return call()
	}
	type result struct {
		v   T
		err error
	}
	var mu sync.Mutex
	gaveUp := false
	done := make(chan result, 1)
	go func() {
		v, err := call()
		mu.Lock()
		if !gaveUp {
			done <- result{v, err}
			mu.Unlock()
			return
		}
		mu.Unlock()
		if late != nil {
			late(v, err)
		}
	}()
	select {
	case r := <-done:
		return r.v, r.err
	case <-ctx.Done():
	}
	var zero T
	ab := &abandonedError{cause: context.Cause(ctx)}
	settle := func(r result) (T, error) {
		if late != nil {
			late(r.v, r.err)
		}
		return zero, ab
	}
	if grace > 0 {
		t := time.NewTimer(grace)
		defer t.Stop()
		select {
		case r := <-done:
			return settle(r)
		case <-t.C:
		}
	}
	mu.Lock()
	select {
	case r := <-done:
		mu.Unlock()
		if grace > 0 {
			return settle(r)
		}
		return r.v, r.err
	default:
	}
	gaveUp = true
	mu.Unlock()
	return zero, ab
}

// awaits reports whether a call with ctx runs on a goroutine (await): on
// a client that does not end calls at their ctx's deadline, when ctx has
// one. As with go-redis's ContextTimeoutEnabled, a ctx's cancellation
// alone does not end a call: the calls the portable layer must have back
// in time (renewals, releases) carry a deadline, and a goroutine for every
// cancellable ctx would slow every acquisition (whose ctx the Locker's
// Close cancels). Call sites test it before making await's closures, which
// the goroutine makes escape: the direct path allocates nothing more.
func (d *Driver) awaits(ctx context.Context) bool {
	if !d.bounds.Detach {
		return false
	}
	_, ok := ctx.Deadline()
	return ok
}

// abandoned reports whether err is a call await stopped waiting for.
func abandoned(err error) bool {
	var ab *abandonedError
	return errors.As(err, &ab)
}

// lateRelease is the late handler of an acquisition the caller stopped
// waiting for: a grant it brought back is given back (owner- and
// hold-checked), as the acquisition's own cleanup gives back what a
// failed attempt may have taken.
func lateRelease(release func(ctx context.Context) error) {
	ctx, cancel := context.WithTimeout(context.Background(), redisproto.CleanupTimeout)
	defer cancel()
	_ = release(ctx)
}
