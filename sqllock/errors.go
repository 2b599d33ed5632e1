package sqllock

import (
	"context"
	"database/sql/driver"
	"errors"
	"fmt"

	"github.com/distlock/distlock/backend"
	"github.com/go-sql-driver/mysql"
)

// Server error numbers the driver reacts to.
const (
	errLockWaitTimeout = 1205 // ER_LOCK_WAIT_TIMEOUT; MariaDB also reports NOWAIT conflicts with it
	errDeadlock        = 1213 // ER_LOCK_DEADLOCK
	errInterrupted     = 1317 // ER_QUERY_INTERRUPTED (KILL QUERY)
	errLockNowait      = 3572 // ER_LOCK_NOWAIT (MySQL 8)
	errTableFull       = 1114 // ER_RECORD_FILE_FULL: a MEMORY table reached max_heap_table_size
)

// serverCode returns the server's error number, or 0 if err did not come
// from the server.
func serverCode(err error) uint16 {
	var me *mysql.MySQLError
	if errors.As(err, &me) {
		return me.Number
	}
	return 0
}

// isConflict reports whether err says the row is locked by another session.
func isConflict(err error) bool {
	switch serverCode(err) {
	case errLockWaitTimeout, errLockNowait, errDeadlock:
		return true
	}
	return false
}

// errDBClosed is what database/sql returns once the *sql.DB is closed; it is
// not exported, so it is recognised by its text.
const errDBClosed = "sql: database is closed"

// classify wraps err with the backend error kind it belongs to: a closed
// *sql.DB is ErrClosed, a server error about the request itself is
// returned as is, and anything else (network, timeouts, a connection the
// server or the driver closed) is ErrUnavailable.
func classify(err error) error {
	switch {
	case err == nil:
		return nil
	case err.Error() == errDBClosed:
		return fmt.Errorf("%w: %w", backend.ErrClosed, err)
	case serverCode(err) != 0 && !connGone(err):
		return err
	default:
		return fmt.Errorf("%w: %w", backend.ErrUnavailable, err)
	}
}

// connGone reports whether err means the connection itself is unusable
// (closed by either side, killed, cut, or abandoned on a canceled ctx).
// Such a connection holds no lock once the server notices.
func connGone(err error) bool {
	if err == nil {
		return false
	}
	switch serverCode(err) {
	case 0:
		return true // network, driver state, ctx: the driver closes the connection
	case 1053, 1927, 2006, 2013: // shutdown, connection killed, gone away, lost
		return true
	}
	return errors.Is(err, driver.ErrBadConn) || errors.Is(err, mysql.ErrInvalidConn) ||
		errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded)
}
