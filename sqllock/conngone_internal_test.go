package sqllock

import (
	"fmt"
	"testing"

	"github.com/go-sql-driver/mysql"
)

// The server errors that end the session are connGone, so that a held
// lock whose session ended is reported not held (Release answers
// ErrNotHeld, not nil). MySQL 8.0.24+ sends 4031 to a session it closes
// for inactivity (wait_timeout, the lock's TTL) before closing it; MariaDB
// just closes the connection. Statement-level refusals are not connGone.
func TestMySQLConnGone(t *testing.T) {
	for _, tc := range []struct {
		code uint16
		gone bool
	}{
		{1053, true}, // server shutdown
		{1927, true}, // connection killed (MariaDB)
		{2006, true}, // gone away
		{2013, true}, // lost
		{4031, true}, // disconnected for inactivity (MySQL 8.0.24+)
		{errLockWaitTimeout, false},
		{errDeadlock, false},
		{errInterrupted, false},
		{errLockNowait, false},
	} {
		err := fmt.Errorf("wrapped: %w", &mysql.MySQLError{Number: tc.code, Message: "x"})
		if got := (mysqlDialect{}).connGone(err); got != tc.gone {
			t.Errorf("connGone(error %d) = %v, want %v", tc.code, got, tc.gone)
		}
	}
}
