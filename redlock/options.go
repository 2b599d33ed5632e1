package redlock

import (
	"fmt"
	"log/slog"

	"github.com/distlock/distlock/backend"
	"github.com/distlock/distlock/internal/redisproto"
)

// DefaultPrefix starts every Redis key and channel the driver uses: the
// same layout as redislock's, so both drivers agree on a key's Redis names.
const DefaultPrefix = redisproto.DefaultPrefix

// WaitMode is how waiters of a held lock wait for it (redislock.WaitMode
// is the same type): WaitQueue, the default, queues them on the first
// node in arrival order, and a release there hands the lock to the oldest
// live waiter, who then takes the other nodes (see Driver.Wait);
// WaitNotify announces a release on every node and the waiters race.
type WaitMode = redisproto.WaitMode

// The wait modes (see WaitMode).
const (
	WaitDefault = redisproto.WaitDefault
	WaitQueue   = redisproto.WaitQueue
	WaitNotify  = redisproto.WaitNotify
)

// Options configures a Driver. The zero value is valid; the caller's
// struct is never modified.
type Options struct {
	// Prefix starts every Redis key and channel the driver uses
	// (DefaultPrefix if empty). It must not contain '{' or '}'.
	Prefix string
	// Wait chooses how waiters wait (see WaitMode); WaitQueue by default.
	// Every client of a key must use the same mode.
	Wait WaitMode
	// Logger receives New's warning about a client whose calls its ctx
	// cannot end (see New); slog.Default() if nil. The driver logs nothing
	// else.
	Logger *slog.Logger
}

func (o *Options) normalize() (Options, error) {
	var out Options
	if o != nil {
		out = *o
	}
	var err error
	if out.Prefix, err = redisproto.OptionPrefix("redlock", out.Prefix); err != nil {
		return out, err
	}
	switch out.Wait {
	case WaitDefault:
		out.Wait = WaitQueue
	case WaitQueue, WaitNotify:
	default:
		return out, fmt.Errorf("redlock: %w: unknown Wait mode %v", backend.ErrInvalidConfig, out.Wait)
	}
	return out, nil
}

var errClosed = fmt.Errorf("redlock: %w", backend.ErrClosed)
