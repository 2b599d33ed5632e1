package distlock

import (
	"context"
	"sync/atomic"
)

// The Locker's goroutines and driver calls: operations Close waits for
// (begin), background work (goBackground), and driver calls bounded by
// their ctx whatever the driver does with it (call, goCall), which Close
// waits for after closing the driver.

// begin registers an operation; false once the Locker is closed.
func (l *Locker) begin() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		return false
	}
	l.ops.Add(1)
	return true
}

// goBackground runs f on a goroutine that Close waits for.
func (l *Locker) goBackground(f func()) {
	l.bg.Go(f)
}

// goCall runs f, which calls the driver, on a goroutine that Close waits
// for after closing the driver: a store client that ignores ctx may keep
// the call out long after its ctx ended.
func (l *Locker) goCall(f func()) {
	l.callsMu.Lock()
	defer l.callsMu.Unlock()
	if l.callsDone {
		go f() // a call racing Close, on a hold Close has ended: its driver is closed or closing
		return
	}
	l.calls.Go(f)
}

// call runs f (a driver call) bounded by ctx whatever the driver does with
// it: if ctx ends before f returns, call returns at once with answered
// false and f goes on in the background, where late (if set) gets its
// error. A ctx that cannot end, or a driver that returns by its ctx's
// end itself (backend.Capabilities.CtxBounded), runs f on the caller's goroutine.
func (l *Locker) call(ctx context.Context, f func(context.Context) error, late func(error)) (err error, answered bool) {
	if ctx.Done() == nil || l.bounded {
		return f(ctx), true
	}
	const (
		waiting int32 = iota
		returned
		gaveUp
	)
	var state atomic.Int32
	done := make(chan error, 1)
	l.goCall(func() {
		err := f(ctx)
		if state.CompareAndSwap(waiting, returned) {
			done <- err
		} else if late != nil {
			late(err)
		}
	})
	select {
	case err := <-done:
		return err, true
	case <-ctx.Done():
	}
	if state.CompareAndSwap(waiting, gaveUp) {
		return nil, false
	}
	return <-done, true // it answered as ctx ended
}
