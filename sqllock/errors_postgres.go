package sqllock

import (
	"errors"
	"strings"

	"github.com/jackc/pgx/v5/pgconn"
)

// PostgreSQL's errors: the SQLSTATEs the driver reacts to, and how the
// dialect classifies an error (see dialect).

const (
	pgUndefinedTable   = "42P01"
	pgLockNotAvailable = "55P03" // NOWAIT conflict, lock_timeout
	pgDeadlock         = "40P01"
	pgSerialization    = "40001" // serialization_failure: a session default of repeatable read or serializable
	pgUniqueViolation  = "23505" // two CREATE TABLE IF NOT EXISTS at once
	pgDuplicateTable   = "42P07"
	pgDuplicateObject  = "42710" // the same race, seen at the table's row type
)

func pgCode(err error) string {
	var pe *pgconn.PgError
	if errors.As(err, &pe) {
		return pe.Code
	}
	return ""
}

// serverError: errAdvisoryBusy is the server's answer too (an advisory
// lock's try returned false).
func (pgDialect) serverError(err error) bool {
	return pgCode(err) != "" || errors.Is(err, errAdvisoryBusy)
}

func (pgDialect) conflict(err error) bool {
	c := pgCode(err)
	return c == pgLockNotAvailable || c == pgDeadlock || errors.Is(err, errAdvisoryBusy)
}

func (pgDialect) retryWait(err error) bool {
	c := pgCode(err)
	return c == pgLockNotAvailable || c == pgDeadlock
}

func (pgDialect) createRace(err error) bool {
	c := pgCode(err)
	return c == pgDeadlock || c == pgSerialization
}

// connGone: anything but an error the server sent about the statement, and
// the server's own errors that end the session (FATAL: terminated,
// idle-in-transaction timeout, shutdown; class 08, connection exceptions).
func (pgDialect) connGone(err error) bool {
	if errors.Is(err, errAdvisoryBusy) {
		return false
	}
	var pe *pgconn.PgError
	if !errors.As(err, &pe) {
		return true
	}
	return pe.Severity == "FATAL" || pe.Severity == "PANIC" || strings.HasPrefix(pe.Code, "08") ||
		pe.Code == "57P01" || pe.Code == "57P02" || pe.Code == "57P03" || pe.Code == "25P03"
}

// pgCreateRace reports an error of CREATE TABLE IF NOT EXISTS run by two
// sessions at once: the loser sees the catalog's unique index, or, when
// the winner committed between its check for the table and its creation
// of the table's row type, "type ... already exists" (TestConcurrentNew).
func pgCreateRace(err error) bool {
	c := pgCode(err)
	return c == pgUniqueViolation || c == pgDuplicateTable || c == pgDuplicateObject
}
