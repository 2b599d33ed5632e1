package distlock

import (
	"context"

	"github.com/distlock/distlock/backend"
)

// obtainRW gets a grant of one side of a read-write lock from the driver:
// one attempt, the driver's own queue, or a retry loop woken by the
// store's release announcements or backoff. A wait for the write side that
// ends without a grant withdraws its waiting mark, so a writer that gave
// up keeps no reader out.
func (l *Locker) obtainRW(ctx context.Context, h *hold, req backend.Request, mode backend.RWMode, wait bool) (backend.Grant, error) {
	rw := l.d.(backend.RWLocker)
	ops := storeOps{
		key:     req.Key,
		ttl:     req.TTL,
		pending: h,
		try:     func(ctx context.Context) (backend.Grant, error) { return rw.TryAcquireRW(ctx, req, mode, false) },
		retry:   func(ctx context.Context) (backend.Grant, error) { return rw.TryAcquireRW(ctx, req, mode, true) },
	}
	if mode == backend.Write {
		// A writer attempts at least every third of its TTL, which keeps
		// its waiting mark alive (the store drops a mark not renewed
		// within the TTL).
		ops.maxDelay = req.TTL / 3
	}
	switch l.caps.RW {
	case backend.WaitQueue:
		if w, ok := l.d.(backend.RWWaiter); ok {
			ops.wait = func(ctx context.Context) (backend.Grant, error) { return w.WaitRW(ctx, req, mode) }
		}
	case backend.WaitNotify:
		if n, ok := l.d.(backend.RWNotifier); ok {
			ops.subscribe = n.SubscribeRW
		}
	}
	g, err := l.obtainWith(ctx, ops, wait)
	if err != nil && wait && ops.wait == nil && mode == backend.Write {
		l.withdrawRW(ctx, rw, req)
	}
	return g, err
}

// withdrawRW removes a writer's waiting mark after a wait that failed,
// with its own timeout (the wait's ctx has usually ended). If the store
// cannot be reached the mark expires by the writer's TTL.
func (l *Locker) withdrawRW(ctx context.Context, rw backend.RWLocker, req backend.Request) {
	wctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), l.cfg.releaseTimeout)
	defer cancel()
	l.tel.storeError(wctx, "withdraw", rw.WithdrawRW(wctx, req))
}
