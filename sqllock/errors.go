package sqllock

import (
	"context"
	"errors"
	"fmt"

	"github.com/distlock/distlock/backend"
)

// errDBClosed is what database/sql returns once the *sql.DB is closed; it is
// not exported, so it is recognised by its text.
const errDBClosed = "sql: database is closed"

// classify wraps err with the backend error kind it belongs to: a closed
// *sql.DB is ErrClosed, a connection the server refused for its settings
// (a wrong password, an unknown database) a *refusedError matching
// ErrInvalidConfig, a canceled ctx's error is returned as is, a server error about the request itself is
// returned as is, and anything else (network, timeouts, a connection the
// server or the driver closed) is ErrUnavailable.
func (d *Driver) classify(err error) error { return classifyWith(d.dia, err) }

func classifyWith(dia dialect, err error) error {
	switch {
	case err == nil:
		return nil
	case err.Error() == errDBClosed:
		return fmt.Errorf("%w: %w", backend.ErrClosed, err)
	case refused(err) != nil:
		return refused(err)
	case errors.Is(err, context.Canceled):
		// The caller canceled: not the store's unavailability (as on
		// every store), and the caller knows why.
		return err
	case dia.serverError(err) && !dia.connGone(err):
		return err
	default:
		return fmt.Errorf("%w: %w", backend.ErrUnavailable, err)
	}
}

// connGone reports whether err means the connection itself is unusable
// (closed by either side, killed, cut, or abandoned on a canceled ctx).
// Such a connection holds no lock once the server notices.
func (d *Driver) connGone(err error) bool { return err != nil && d.dia.connGone(err) }
