package distlock

import (
	"context"
	"errors"
	"time"

	"github.com/distlock/distlock/backend"
)

// obtainRW gets a grant of one side of a read-write lock from the driver:
// one attempt, the driver's own queue, or a retry loop woken by the
// store's release announcements or backoff. A wait for the write side that
// ends without a grant withdraws its waiting mark, so a writer that gave
// up keeps no reader out.
func (l *Locker) obtainRW(ctx context.Context, req backend.Request, mode backend.RWMode, wait bool) (backend.Grant, error) {
	rw := l.d.(backend.RWLocker)
	started := time.Now()
	var g backend.Grant
	var err error
	if wait {
		l.tel.m.waiters.Add(ctx, 1, l.tel.base.add...)
		defer l.tel.m.waiters.Add(ctx, -1, l.tel.base.add...)
	}
	switch w, queued := l.d.(backend.RWWaiter); {
	case !wait:
		g, err = rw.TryAcquireRW(ctx, req, mode, false)
		err = unanswered(ctx, err)
		l.tel.storeError(ctx, "acquire", err)
	case queued && l.caps.RW == backend.WaitQueue:
		g, err = l.queueWaitRW(ctx, w, req, mode)
	default:
		g, err = l.retryWaitRW(ctx, rw, req, mode)
		if err != nil && mode == backend.Write {
			l.withdrawRW(ctx, rw, req)
		}
	}
	if err != nil {
		return g, err
	}
	if g.ValidFrom.IsZero() {
		g.ValidFrom = started
	}
	return g, nil
}

// queueWaitRW is queueWait for a side of a read-write lock.
func (l *Locker) queueWaitRW(ctx context.Context, w backend.RWWaiter, req backend.Request, mode backend.RWMode) (backend.Grant, error) {
	var bo backoff
	for {
		g, err := w.WaitRW(ctx, req, mode)
		l.tel.storeError(ctx, "wait", err)
		if err == nil || !errors.Is(err, ErrUnavailable) || ctx.Err() != nil {
			return g, waitErr(ctx, err, nil)
		}
		if serr := sleep(ctx, bo.next(pollMin, outageMax), nil); serr != nil {
			return g, waitErr(ctx, serr, err)
		}
	}
}

// retryWaitRW retries TryAcquireRW (marked as waiting) until it succeeds,
// subscribing first to release announcements where the driver offers
// them. A writer attempts at least every third of its TTL, which keeps
// its waiting mark alive (the store drops a mark not renewed within the
// TTL).
func (l *Locker) retryWaitRW(ctx context.Context, rw backend.RWLocker, req backend.Request, mode backend.RWMode) (backend.Grant, error) {
	notifier, _ := l.d.(backend.RWNotifier)
	if l.caps.RW != backend.WaitNotify {
		notifier = nil
	}
	var wake <-chan struct{}
	var bo backoff
	var lastErr error
	unsubscribe := func() {}
	defer func() { unsubscribe() }()
	for {
		sent := time.Now()
		g, err := rw.TryAcquireRW(ctx, req, mode, true)
		l.tel.storeError(ctx, "acquire", err)
		if err == nil {
			if g.ValidFrom.IsZero() {
				g.ValidFrom = sent
			}
			return g, nil
		}
		if ctx.Err() != nil {
			return g, waitErr(ctx, err, lastErr)
		}
		var delay time.Duration
		switch {
		case errors.Is(err, ErrNotAcquired):
			if notifier != nil && wake == nil {
				w, cancel, serr := notifier.SubscribeRW(ctx, req.Key)
				if serr == nil {
					wake, unsubscribe = w, cancel
					continue // re-check: a release before the subscription is not announced
				}
				l.tel.storeError(ctx, "subscribe", serr)
				lastErr = serr
			}
			delay = l.waitDelay(&bo, backend.RetryAfter(err), wake != nil)
		case errors.Is(err, ErrUnavailable):
			lastErr = err
			delay = bo.next(pollMin, outageMax)
		default:
			return g, err
		}
		if mode == backend.Write {
			delay = min(delay, req.TTL/3)
		}
		if err := sleep(ctx, delay, wake); err != nil {
			return g, waitErr(ctx, err, lastErr)
		}
	}
}

// withdrawRW removes a writer's waiting mark after a wait that failed,
// with its own timeout (the wait's ctx has usually ended). If the store
// cannot be reached the mark expires by the writer's TTL.
func (l *Locker) withdrawRW(ctx context.Context, rw backend.RWLocker, req backend.Request) {
	wctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), l.cfg.releaseTimeout)
	defer cancel()
	l.tel.storeError(wctx, "withdraw", rw.WithdrawRW(wctx, req))
}
