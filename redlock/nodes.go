package redlock

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"
)

// nodeTimeout is how long one of n nodes may take to answer for a lock of
// ttl: together they may use a third of it.
func nodeTimeout(ttl time.Duration, n int) time.Duration {
	return max(ttl/time.Duration(nodeWaitFrac*n), minNodeWait)
}

// eachNode runs fn on every node concurrently and returns each node's
// result, waiting at most timeout: a go-redis client without
// ContextTimeoutEnabled ignores ctx deadlines and waits its ReadTimeout, and
// one slow node must not hold up the quorum. A node that has not answered
// by then gets an error; its call finishes in the background (Close waits
// for it) and its result goes to late, if not nil, else is dropped.
func eachNode[T any](r *Driver, ctx context.Context, timeout time.Duration, fn func(ctx context.Context, i int, n *node) (T, error), late ...func(T)) ([]T, []error) {
	return someNodes(r, ctx, timeout, nil, fn, late...)
}

// someNodes is eachNode on the nodes whose index is in only (every node if
// only is nil); the others get zero results.
func someNodes[T any](r *Driver, ctx context.Context, timeout time.Duration, only []int, fn func(ctx context.Context, i int, n *node) (T, error), late ...func(T)) ([]T, []error) {
	return nodesUntil(r, ctx, timeout, only, fn, nil, late...)
}

// errNotAwaited is the error of a node the call stopped waiting for
// because the answers before it decided the outcome (nodesUntil's
// decided).
var errNotAwaited = errors.New("not awaited: the other nodes' answers decided")

// nodesUntil is someNodes that, when decided is not nil, calls it with
// each answer as it comes and stops waiting once it returns true: the
// nodes still running get errNotAwaited, and their results go to late as
// for a node that did not answer in time.
func nodesUntil[T any](r *Driver, ctx context.Context, timeout time.Duration, only []int, fn func(ctx context.Context, i int, n *node) (T, error), decided func(i int, v T, err error) bool, late ...func(T)) ([]T, []error) {
	if only == nil {
		only = r.all
	}
	vals := make([]T, len(r.nodes))
	errs := make([]error, len(r.nodes))
	if len(only) == 0 {
		return vals, errs
	}
	cctx, cancel := callContext(ctx, timeout)
	w := &round[T]{vals: vals, errs: errs, answered: make([]bool, len(r.nodes)), pending: len(only), running: len(only),
		done: make(chan struct{}), cancel: cancel, decided: decided, late: late}
	r.bgMu.Lock()
	for _, i := range only {
		if r.closing {
			var zero T
			w.answer(i, zero, errClosed)
			continue
		}
		n := r.nodes[i]
		r.goNode(func() {
			v, err := fn(cctx, i, n)
			w.answer(i, v, err)
		})
	}
	r.bgMu.Unlock()
	select {
	case <-w.done:
	case <-cctx.Done():
	case <-ctx.Done():
	}
	w.stop(ctx, cctx, only, timeout)
	return vals, errs
}

// callContext is the context of nodesUntil's calls.
func callContext(ctx context.Context, timeout time.Duration) (context.Context, context.CancelFunc) {
	// The calls' context ends at the caller's deadline or after timeout,
	// and when the caller stops waiting because ctx ended or the time is
	// up; not when it stops because the answers so far decided (early):
	// the calls it did not wait for run on (their late answers count),
	// and the last to answer ends it.
	deadline := time.Now().Add(timeout)
	if d, ok := ctx.Deadline(); ok && d.Before(deadline) {
		deadline = d
	}
	cctx, cancel := context.WithDeadline(context.WithoutCancel(ctx), deadline)
	if ctx.Err() != nil {
		cancel() // as the old calls on ctx: a call on an ended context sends nothing
	}
	return cctx, cancel
}

// round is one nodesUntil call's answers. The calls record their answers
// under mu; the one that completes the set, or decides the outcome, wakes
// the caller (done): one wake-up per round, not one per node. Once the
// caller stopped waiting (gaveUp), answers go to late instead.
type round[T any] struct {
	mu               sync.Mutex
	gaveUp, early    bool
	pending, running int
	done             chan struct{}
	answered         []bool
	vals             []T
	errs             []error
	cancel           context.CancelFunc // ends the calls' context
	decided          func(i int, v T, err error) bool
	late             []func(T)
}

// answer records node i's answer.
func (w *round[T]) answer(i int, v T, err error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.running--; w.running == 0 {
		w.cancel()
	}
	if w.gaveUp {
		for _, f := range w.late {
			f(v)
		}
		return
	}
	w.vals[i], w.errs[i], w.answered[i] = v, err, true
	w.pending--
	if w.pending == 0 || (w.decided != nil && w.decided(i, v, err)) {
		w.early = w.pending > 0
		w.gaveUp = true
		close(w.done)
	}
}

// stop ends the caller's wait on the nodes in only: the answers from now
// on go to late, and each node that did not answer gets its error.
func (w *round[T]) stop(ctx, cctx context.Context, only []int, timeout time.Duration) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.gaveUp = true
	if !w.early {
		w.cancel()
	}
	cause := context.Cause(ctx)
	if cause == nil {
		cause = context.Cause(cctx)
	}
	for _, i := range only {
		if !w.answered[i] {
			if w.early {
				w.errs[i] = fmt.Errorf("node %d: %w", i, errNotAwaited)
			} else {
				w.errs[i] = fmt.Errorf("node %d: no answer within %v: %w", i, timeout, cause)
			}
		}
	}
}

// workerIdle is how long a node-call worker waits for the next call
// before it ends.
const workerIdle = 5 * time.Second

// goNode runs the node call f on a worker goroutine: an idle one if there
// is one, else a new one, which then waits workerIdle for more calls. A
// goroutine started for each call would grow its stack through go-redis's
// call depth every time (copied 2 → 4 → 8 → 16 KB and more): about a
// fifth of the client's CPU in a Redlock pair; TestRedlockNodeCallWorkers). r.bgMu
// is held and closing unset, so no worker starts while Close waits.
func (r *Driver) goNode(f func()) {
	select {
	case r.tasks <- f:
	default:
		r.bg.Go(func() { r.work(f) })
	}
}

// work runs f, then the calls handed to it, until it has been idle for
// workerIdle or the driver closes.
func (r *Driver) work(f func()) {
	idle := time.NewTimer(workerIdle)
	defer idle.Stop()
	for {
		f()
		idle.Reset(workerIdle)
		select {
		case f = <-r.tasks:
		case <-idle.C:
			return
		case <-r.quit:
			return
		}
	}
}
