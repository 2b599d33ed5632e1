package redislock

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
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

// ClientBounds is what New learns from a client's options about its
// calls' bounds.
type ClientBounds struct {
	// detach: the client does not end a call when its ctx ends (no
	// ContextTimeoutEnabled, or read/write deadlines disabled); the driver
	// runs calls it may have to stop waiting for on goroutines (await).
	Detach bool
	// deadlines: the client ends a call at its ctx's deadline (but not at
	// its cancellation).
	Deadlines bool
	// known: the options could be read (a *redis.Client, a
	// *redis.ClusterClient or a *redis.Ring).
	Known                     bool
	ctxTimeouts               bool
	readTimeout, writeTimeout time.Duration // as normalised by go-redis: 0 none, < 0 deadlines disabled
	kind                      string
}

func BoundsOf(c redis.UniversalClient) ClientBounds {
	var b ClientBounds
	switch c := c.(type) {
	case *redis.Client:
		o := c.Options()
		b = ClientBounds{Known: true, ctxTimeouts: o.ContextTimeoutEnabled, readTimeout: o.ReadTimeout, writeTimeout: o.WriteTimeout, kind: "redis.Options"}
	case *redis.ClusterClient:
		o := c.Options()
		b = ClientBounds{Known: true, ctxTimeouts: o.ContextTimeoutEnabled, readTimeout: o.ReadTimeout, writeTimeout: o.WriteTimeout, kind: "redis.ClusterOptions"}
	case *redis.Ring:
		o := c.Options()
		b = ClientBounds{Known: true, ctxTimeouts: o.ContextTimeoutEnabled, readTimeout: o.ReadTimeout, writeTimeout: o.WriteTimeout, kind: "redis.RingOptions"}
	default:
		return ClientBounds{Detach: true}
	}
	b.Deadlines = b.ctxTimeouts && b.readTimeout >= 0 && b.writeTimeout >= 0
	b.Detach = !b.Deadlines
	return b
}

// warn logs, at New, what the client's options leave unbounded: nothing
// when the client ends calls at their ctx's deadline. The driver's calls
// return by their ctx either way; what the options decide is how long a
// call the driver stopped waiting for keeps its connection (and a
// goroutine): up to the ReadTimeout, or, with none, until the server
// answers.
func (b ClientBounds) Warn(l *slog.Logger) {
	if !b.Known {
		l.Warn("redislock: the client's options cannot be read (not a *redis.Client, *redis.ClusterClient or *redis.Ring): a call that outlives its ctx is left running on a goroutine, its connection busy until the client returns it")
		return
	}
	if b.Deadlines {
		return
	}
	switch {
	case b.readTimeout < 0 || b.writeTimeout < 0:
		l.Warn("redislock: the go-redis client sets no read or write deadlines (ReadTimeout or WriteTimeout -2), so no ctx bounds its calls: a call the driver stops waiting for at its ctx's end (a lease's renewal at its deadline, an Acquire or Release whose ctx ended) keeps its connection and a goroutine until the server answers, without bound; with the server stalled, the pool runs out of connections. Set a ReadTimeout and ContextTimeoutEnabled: true",
			"options", b.kind, "ReadTimeout", b.readTimeout, "WriteTimeout", b.writeTimeout, "ContextTimeoutEnabled", b.ctxTimeouts)
	case b.readTimeout == 0:
		l.Warn("redislock: the go-redis client has no read timeout (ReadTimeout -1) and ignores ctx deadlines (ContextTimeoutEnabled false): a call the driver stops waiting for at its ctx's end (a lease's renewal at its deadline, an Acquire or Release whose ctx ended) keeps its connection and a goroutine until the server answers, without bound; with the server stalled, the pool runs out of connections. Set ContextTimeoutEnabled: true",
			"options", b.kind, "ReadTimeout", b.readTimeout, "ContextTimeoutEnabled", b.ctxTimeouts)
	default:
		l.Warn("redislock: the go-redis client ignores ctx deadlines (ContextTimeoutEnabled false): a call the driver stops waiting for at its ctx's end (a lease's renewal at its deadline, an Acquire or Release whose ctx ended) keeps its connection busy for up to ReadTimeout; leases still end at their deadline and calls return by their ctx. Set ContextTimeoutEnabled: true to have the client end such calls itself",
			"options", b.kind, "ReadTimeout", b.readTimeout, "ContextTimeoutEnabled", b.ctxTimeouts)
	}
}

// abandonedError is a call the driver stopped waiting for because its ctx
// ended while the client went on with it.
type abandonedError struct{ cause error }

func (e *abandonedError) Error() string {
	return fmt.Sprintf("no answer before the call's context ended; the client goes on with it in the background (it does not end calls at their context's end: see redislock.New): %v", e.cause)
}

func (e *abandonedError) Unwrap() error { return e.cause }

// await returns call's result, or an *abandonedError when ctx's deadline
// passes first on a client that would not end the call then
// (ClientBounds.detach). The call then goes on on its goroutine, and
// late, if not nil, gets its result when it ends: before await returns if
// that is within grace after ctx's end (an acquisition waits CleanupTimeout
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
	ctx, cancel := context.WithTimeout(context.Background(), CleanupTimeout)
	defer cancel()
	_ = release(ctx)
}
