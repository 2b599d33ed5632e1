package sqllock

import (
	"errors"
	"fmt"
	"net"
	"strconv"

	"github.com/distlock/distlock/backend"
	"github.com/go-sql-driver/mysql"
	"github.com/jackc/pgx/v5/pgconn"
)

// refusedError is a connection the server refused for its settings: a
// wrong password or user, an unknown database, an account the server
// will not let in. No retry fixes it: it matches ErrInvalidConfig (not
// ErrUnavailable) and unwraps to the driver's error too. Its text is one
// line naming the user, host and database (those known) and the server's
// own words, without the driver's per-attempt details (pgx lists each
// TLS and plain attempt on a line of its own) and never the password.
type refusedError struct {
	user, host, db string
	server         string // the server's message
	err            error
}

func (e *refusedError) Error() string {
	who := "the server refused the connection"
	if e.user != "" {
		who = fmt.Sprintf("the server refused user %q", e.user)
	}
	if e.db != "" {
		who += fmt.Sprintf(" on database %q", e.db)
	}
	if e.host != "" {
		who += " at " + e.host
	}
	return fmt.Sprintf("%v: %s: %s", backend.ErrInvalidConfig, who, e.server)
}

func (e *refusedError) Unwrap() []error { return []error{backend.ErrInvalidConfig, e.err} }

// MySQL and MariaDB error numbers that refuse a connection for its
// settings.
var mysqlRefusals = map[uint16]bool{
	1044: true, // ER_DBACCESS_DENIED_ERROR: the user may not use the database
	1045: true, // ER_ACCESS_DENIED_ERROR: wrong user or password
	1049: true, // ER_BAD_DB_ERROR: unknown database
	1251: true, // ER_NOT_SUPPORTED_AUTH_MODE: an authentication plugin the client lacks
	1698: true, // ER_ACCESS_DENIED_NO_PASSWORD_ERROR: e.g. root with unix_socket authentication
	1820: true, // ER_MUST_CHANGE_PASSWORD
	1862: true, // ER_MUST_CHANGE_PASSWORD_LOGIN: the password has expired
	3118: true, // ER_ACCOUNT_HAS_BEEN_LOCKED (MySQL)
}

// refused returns err as a *refusedError if the server refused the
// connection for its settings (PostgreSQL SQLSTATE class 28, invalid
// authorization: a wrong password, an unknown user, no pg_hba.conf entry;
// 3D000, an unknown database; MySQL's mysqlRefusals), else nil.
func refused(err error) *refusedError {
	var re *refusedError
	if errors.As(err, &re) {
		return re
	}
	var pe *pgconn.PgError
	if errors.As(err, &pe) && (pe.Code == "3D000" || (len(pe.Code) == 5 && pe.Code[:2] == "28")) {
		re = &refusedError{server: fmt.Sprintf("%s: %s (SQLSTATE %s)", pe.Severity, pe.Message, pe.Code), err: err}
		var ce *pgconn.ConnectError
		if errors.As(err, &ce) && ce.Config != nil {
			re.user, re.db = ce.Config.User, ce.Config.Database
			if ce.Config.Host != "" {
				re.host = net.JoinHostPort(ce.Config.Host, strconv.Itoa(int(ce.Config.Port)))
			}
		}
		return re
	}
	var me *mysql.MySQLError
	if errors.As(err, &me) && mysqlRefusals[me.Number] {
		return &refusedError{server: me.Error(), err: err}
	}
	return nil
}

// at fills in the user, host and database e does not name yet (MySQL's
// errors name the user and the client's host, not the server or the
// database) and returns e.
func (e *refusedError) at(user, host, db string) *refusedError {
	if e.user == "" {
		e.user = user
	}
	if e.host == "" {
		e.host = host
	}
	if e.db == "" {
		e.db = db
	}
	return e
}
