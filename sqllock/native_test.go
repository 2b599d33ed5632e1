package sqllock_test

import (
	"database/sql/driver"
	"errors"
	"net"

	"github.com/go-sql-driver/mysql"
)

// NativeError implements conformance.NativeErrors: a MySQL server error,
// the driver's connection errors, or the network error of its connection.
func (h *harness) NativeError(err error) bool {
	var merr *mysql.MySQLError
	var nerr net.Error
	return errors.As(err, &merr) || errors.As(err, &nerr) ||
		errors.Is(err, mysql.ErrInvalidConn) || errors.Is(err, driver.ErrBadConn)
}
