package sqllock

import (
	"context"
	"time"

	"github.com/distlock/distlock/internal/backoff"
)

// killGrace is how long a waiter whose ctx ended waits for KILL QUERY to
// interrupt its blocked statement before closing the connection instead.
const killGrace = 5 * time.Second

// killRetry is the first pause before the interruption is sent again to a
// statement that has not ended; it doubles up to killRetryMax (jittered).
const (
	killRetry    = 10 * time.Millisecond
	killRetryMax = 250 * time.Millisecond
)

// interruptible runs fn with a context that outlives ctx; when ctx ends
// first, the statement fn is running is interrupted with KILL QUERY from
// another connection, and if that cannot be sent, or does not end fn
// within killGrace, fn's context is canceled (the driver then closes the
// connection). It returns once no KILL can reach a later statement of the
// connection, and sets *killed (when not nil) if ctx ended while fn ran.
//
// The interruption is sent again, with growing pauses, until fn returns:
// the server ignores a KILL QUERY (and pg_cancel_backend) that reaches
// the session between two statements of fn (the next statement starts
// afresh), so a single one, sent as ctx ended just before fn's blocking
// statement reached the server, would leave that statement waiting in
// the server until killGrace, and then, with the connection closed
// under it, waiting on there (a ghost waiter that takes the lock when
// its holder releases it) until the server's own lock-wait timeout.
// Once fn has returned nothing more is sent.
func (lc *lockConn) interruptible(ctx context.Context, fn func(sctx context.Context) error, killed *bool) error {
	sctx, scancel := context.WithCancel(context.WithoutCancel(ctx))
	defer scancel()
	returned, done := make(chan struct{}), make(chan struct{})
	stop := context.AfterFunc(ctx, func() {
		defer close(done)
		kctx, kcancel := context.WithTimeout(context.Background(), killGrace)
		defer kcancel()
		var bo backoff.Backoff
		for {
			if err := lc.interrupt(kctx); err != nil {
				scancel()
				return
			}
			t := time.NewTimer(bo.Next(killRetry, killRetryMax))
			select {
			case <-returned:
				t.Stop()
				return
			case <-kctx.Done():
				t.Stop()
				scancel()
				return
			case <-t.C:
			}
		}
	})
	err := fn(sctx)
	close(returned)
	if !stop() {
		<-done // no KILL may reach a later statement of this connection
		if killed != nil {
			*killed = true
		}
	}
	return err
}

// outOfBand is a dialect that interrupts a connection's statement without
// another connection of the pool: PostgreSQL's cancel request goes over a
// connection of its own to the server, outside the pool, so a waiter
// whose ctx ends is interrupted at once even when every connection of a
// bounded pool is in use (pg_cancel_backend would wait for one).
type outOfBand interface {
	cancelConn(ctx context.Context, lc *lockConn) error
}

// interrupt interrupts the statement lc runs: out of band where the
// dialect can, else with its cancel statement on another connection.
func (lc *lockConn) interrupt(ctx context.Context) error {
	if ob, ok := lc.d.dia.(outOfBand); ok {
		return ob.cancelConn(ctx, lc)
	}
	return lc.d.dia.cancel(ctx, lc.d, lc.id)
}
