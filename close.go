package distlock

import (
	"context"
	"errors"
	"slices"
	"sync"
	"sync/atomic"
	"time"
)

// What Close ends: every operation's ctx is bound to it (bindClose), so
// that waits end with ErrClosed, and every hold is released, many at a
// time, each within the release timeout (releaseAll). Close itself is in
// locker.go.

// closeWorkers bounds the releases Close has in flight at once: a Locker
// holding 100,000 leases neither starts 100,000 goroutines nor queues
// 100,000 requests for its client's few connections at once.
const closeWorkers = 64

// releaseAll ends every hold of held with cause, releasing each in the
// store within the release timeout, at most closeWorkers at a time. The
// timeout bounds each release, not all of them: a Locker with more leases
// than its store can release in one timeout still releases every one while
// the store answers. Once a whole timeout has passed with no release
// answered (the store is unreachable), the releases not yet sent are made
// with a ctx already ended, so those leases are abandoned to expire and
// Close ends in about one timeout whatever the number of leases.
func (l *Locker) releaseAll(held []*hold, cause error) []error {
	errs := make([]error, len(held))
	timeout := l.cfg.releaseTimeout
	var next atomic.Int64
	var lastAnswer atomic.Int64 // UnixNano of the latest answered release
	lastAnswer.Store(time.Now().UnixNano())
	gone, giveUp := context.WithCancel(context.Background())
	giveUp() // the ctx of releases not sent once the store stopped answering
	// A release's slot is held until the driver returns, which may be
	// after the release has given up on it (a client that ignores ctx):
	// the store's client never has more than closeWorkers releases out.
	slots := make(chan struct{}, closeWorkers)
	returned := func() { <-slots }
	var wg sync.WaitGroup
	for range min(closeWorkers, len(held)) {
		wg.Go(func() {
			for {
				i := int(next.Add(1) - 1)
				if i >= len(held) {
					return
				}
				slots <- struct{}{}
				if time.Since(time.Unix(0, lastAnswer.Load())) >= timeout {
					errs[i] = l.endHold(gone, held[i], cause, returned)
					continue
				}
				ctx, cancel := context.WithTimeout(context.Background(), timeout)
				errs[i] = l.endHold(ctx, held[i], cause, returned)
				cancel()
				if answered(errs[i]) {
					lastAnswer.Store(time.Now().UnixNano())
				}
			}
		})
	}
	wg.Wait()
	return errs
}

// answered reports whether a release's outcome came from the store: done,
// or refused (the lock was gone), as opposed to no answer in time.
func answered(err error) bool {
	return err == nil || errors.Is(err, ErrNotHeld) ||
		!errors.Is(err, ErrUnavailable) && !errors.Is(err, context.DeadlineExceeded) && !errors.Is(err, context.Canceled)
}

// ignoreExpected drops release errors that Close need not report: a lock the
// store had already freed.
func ignoreExpected(err error) error {
	if err == nil || errors.Is(err, ErrNotHeld) || errors.Is(err, ErrLost) {
		return nil
	}
	return err
}

// bindClose returns ctx, canceled also (with ErrClosed) when the Locker
// closes, and the binding, whose stop the caller must call when done.
// The binding is a slot in Locker.binds, not a context.AfterFunc on the
// Locker's close ctx: an acquisition then makes one context (two
// allocations) instead of three contexts and closures (six), and takes no
// lock shared with other Lockers' contexts.
func (l *Locker) bindClose(ctx context.Context) (context.Context, closeBinding) {
	ctx, cancel := context.WithCancelCause(ctx)
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		cancel(ErrClosed)
		return ctx, closeBinding{cancel: cancel, slot: -1}
	}
	b := closeBinding{l: l, cancel: cancel}
	if n := len(l.freeBinds); n > 0 {
		b.slot = l.freeBinds[n-1]
		l.freeBinds = l.freeBinds[:n-1]
		l.binds[b.slot] = cancel
	} else {
		b.slot = len(l.binds)
		l.binds = append(l.binds, cancel)
	}
	return ctx, b
}

// A closeBinding ties an operation's ctx to the Locker's Close
// (bindClose).
type closeBinding struct {
	l      *Locker // nil if the Locker was closed already
	slot   int
	cancel context.CancelCauseFunc
}

// stop unbinds the operation and cancels its ctx.
func (b closeBinding) stop() {
	if b.l != nil {
		b.l.mu.Lock()
		b.l.binds[b.slot] = nil
		b.l.freeBinds = append(b.l.freeBinds, b.slot)
		b.l.mu.Unlock()
	}
	b.cancel(context.Canceled)
}

// cancelBound cancels the ctx of every operation bound to Close. Close
// calls it once, after marking the Locker closed.
func (l *Locker) cancelBound() {
	l.mu.Lock()
	bound := slices.Clone(l.binds)
	l.mu.Unlock()
	for _, cancel := range bound {
		if cancel != nil {
			cancel(ErrClosed)
		}
	}
}
