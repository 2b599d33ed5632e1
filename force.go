package distlock

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/distlock/distlock/backend"
)

// ForceRelease frees the lock named key in the store whoever holds it: an
// operator's last resort for a holder that is stuck (alive, renewing, and
// never releasing). by names who frees it (required: an operator's name,
// a host:pid) and reason says why; both are logged (at Warn) and, where
// the store keeps a record, Inspect reports them afterwards
// (backend.Info.Forced: `distlock status` prints "forced free by BY at
// T"). It returns what the store knew of the holder it freed.
//
// The freed holder is not told: its next renewal finds the lock gone and
// its Lease ends with ErrLost (within a third of its TTL while its
// watchdog renews). Until then it may still believe it holds the lock, so
// the protected resource must check fencing tokens: the next holder's
// token is strictly greater than the freed holder's, on every store.
//
// It frees the mutex only (not a semaphore's permits or a read-write
// lock's sides). A free key answers an error matching ErrNotHeld; a store
// that cannot free another client's lock (Capabilities.ForceRelease
// false) answers ErrUnsupported. ctx bounds the call.
func (l *Locker) ForceRelease(ctx context.Context, key, by, reason string) (backend.Info, error) {
	if err := checkKey(key, l.maxKey); err != nil {
		return backend.Info{}, fmt.Errorf("distlock: force release: %w", err)
	}
	if by == "" {
		return backend.Info{}, fmt.Errorf("distlock: force release %q: %w: by (who frees the lock) is empty", key, ErrInvalidConfig)
	}
	if !l.caps.ForceRelease { // declared, and the driver is an Inspector (Offers)
		return backend.Info{}, fmt.Errorf("distlock: force release %q: %w: the %s backend cannot free another client's lock", key, ErrUnsupported, l.caps.Name)
	}
	if !l.begin() {
		return backend.Info{}, fmt.Errorf("distlock: force release %q: %w", key, ErrClosed)
	}
	defer l.ops.Done()
	ctx, bound := l.bindClose(ctx)
	defer bound.stop()
	f := backend.Forced{By: by, Reason: reason, At: time.Now()}
	info, err := l.d.(backend.Inspector).ForceRelease(ctx, key, f)
	if err != nil {
		return info, fmt.Errorf("distlock: force release %q: %w", key, err)
	}
	l.cfg.logger.LogAttrs(ctx, slog.LevelWarn, "distlock: lock forced free",
		slog.String("key", key), slog.String("owner", info.Owner), slog.Uint64("token", info.Token),
		slog.String("by", by), slog.String("reason", reason))
	return info, nil
}
