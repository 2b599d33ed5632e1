package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/distlock/distlock"
	"github.com/distlock/distlock/backend"
)

// semaphoreStatus prints key's semaphore grants; exit 0 when a permit is
// held, ExitFree when none.
func semaphoreStatus(ctx context.Context, w io.Writer, o queryOpts, key string) error {
	return kindStatus(ctx, w, o, key, backend.Permits, "status --semaphore", semaphoreState)
}

// rwStatus prints key's read-write lock holders; exit 0 when held,
// ExitFree when free.
func rwStatus(ctx context.Context, w io.Writer, o queryOpts, key string) error {
	return kindStatus(ctx, w, o, key, backend.Write, "status --rw", rwState)
}

// kindStatus prints the state of key's lock of a shared kind (a
// semaphore's permits, a read-write lock's sides), read by the backend's
// Inspector for kind.
func kindStatus(ctx context.Context, w io.Writer, o queryOpts, key string, kind backend.Kind, name string,
	toState func(backend string, key string, info backend.Info, read time.Time) state) error {
	qctx, cancel := context.WithTimeout(ctx, o.timeout)
	defer cancel()
	locker, in, err := openInspector(qctx, o, name)
	if err != nil {
		return o.unanswered(ctx, qctx, "status", err)
	}
	defer locker.Close()
	info, err := inspectKind(qctx, locker, in, name, key, kind)
	if err != nil {
		return o.unanswered(ctx, qctx, "status", err)
	}
	return o.show(w, toState(locker.Capabilities().Name, key, info, time.Now()))
}

// inspectKind is in.Inspect of key's lock of kind; a backend that cannot
// inspect that kind is reported as one that inspects nothing is (see
// openInspector).
func inspectKind(ctx context.Context, locker *distlock.Locker, in backend.Inspector, name, key string, kind backend.Kind) (backend.Info, error) {
	info, err := in.Inspect(ctx, key, kind)
	if errors.Is(err, backend.ErrUnsupported) {
		return info, fmt.Errorf("%s: %w by the %s backend", name, distlock.ErrUnsupported, locker.Capabilities().Name)
	}
	return info, err
}
