package main

import (
	"context"
	"io"
	"time"

	"github.com/distlock/distlock/backend"
)

// semaphoreStatus prints key's semaphore grants; exit 0 when a permit is
// held, ExitFree when none.
func semaphoreStatus(ctx context.Context, w io.Writer, o queryOpts, key string) error {
	qctx, cancel := context.WithTimeout(ctx, o.timeout)
	defer cancel()
	locker, in, err := openAs[backend.SemaphoreInspector](qctx, o, "status --semaphore")
	if err != nil {
		return o.unanswered(ctx, qctx, "status", err)
	}
	defer locker.Close()
	info, err := in.InspectSemaphore(qctx, key)
	if err != nil {
		return o.unanswered(ctx, qctx, "status", err)
	}
	return o.show(w, semaphoreState(locker.Capabilities().Name, key, info, time.Now()))
}

// rwStatus prints key's read-write lock holders; exit 0 when held,
// ExitFree when free.
func rwStatus(ctx context.Context, w io.Writer, o queryOpts, key string) error {
	qctx, cancel := context.WithTimeout(ctx, o.timeout)
	defer cancel()
	locker, in, err := openAs[backend.RWInspector](qctx, o, "status --rw")
	if err != nil {
		return o.unanswered(ctx, qctx, "status", err)
	}
	defer locker.Close()
	info, err := in.InspectRW(qctx, key)
	if err != nil {
		return o.unanswered(ctx, qctx, "status", err)
	}
	return o.show(w, rwState(locker.Capabilities().Name, key, info, time.Now()))
}
