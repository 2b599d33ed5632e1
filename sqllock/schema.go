package sqllock

import (
	"context"
	"fmt"
	"regexp"

	"github.com/distlock/distlock/backend"
)

// DefaultTable is the lock table's name when none is given. The fencing
// counters live in a second table named after it with the suffix
// [FenceSuffix].
const DefaultTable = "distlock_locks"

// FenceSuffix is appended to the lock table's name to name the table of
// durable fencing epochs.
const FenceSuffix = "_fence"

// LiveSuffix is appended to the lock table's name to name the MEMORY table
// of live token counters, which the server empties when it restarts.
const LiveSuffix = "_live"

// seqBits is the width of the sequence part of a fencing token: a token is
// epoch<<seqBits | seq, where the epoch is a durable per-key counter in
// the fence table, bumped (one durable commit) whenever the key's live
// counter is missing (first use, server restart, eviction) or reaches the
// end of its epoch, and seq counts the grants within the epoch in the
// MEMORY table, without a durable write. The epoch stays below
// 1<<(63-seqBits), so tokens fit an int64.
const (
	seqBits = 24
	seqMask = 1<<seqBits - 1
)

// evictRows is how many of the least recently granted live counters are
// forgotten when the MEMORY table is full (max_heap_table_size).
const evictRows = 256

// ModeSuffix is appended to the lock table's name to name the table that
// records the mode the table is used in (PostgreSQL: row, advisory or
// session; MySQL, MariaDB: row or session): Drivers of another mode are
// refused (see [Options.Advisory], [Options.Session]).
const ModeSuffix = "_mode"

// SemSuffix is appended to the lock table's name to name the table of
// semaphore permit slots (one row per permit, see semaphore.go).
const SemSuffix = "_sem"

// ProcSuffix is appended to the lock table's name to name the stored
// procedure that takes a key's row lock and moves its live token counter
// on in one CALL (MySQL and MariaDB; see [Options.NoProcedure]). The
// digit is the procedure's version: a later release that changes the
// body creates it under a new name, so that Drivers of both versions can
// run against one schema.
const ProcSuffix = "_next1"

// maxKeyLen is the width of the name columns: the portable layer's limit.
const maxKeyLen = 1024

// tableName accepts plain identifiers only, short enough that the fence
// table's name stays within MySQL's 64-character limit. Anything else is
// rejected rather than escaped, so no input reaches the SQL text.
var tableName = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]{0,57}$`)

// checkTable reports why name cannot be the lock table's name.
func checkTable(name string) error {
	if !tableName.MatchString(name) {
		return fmt.Errorf("%w: table name %q: want 1 to 58 letters, digits or underscores, not starting with a digit",
			backend.ErrInvalidConfig, name)
	}
	return nil
}

// DDL returns the statements that create the lock table, its durable
// fencing-epoch table, its MEMORY table of live token counters, the
// semaphores' table of permit slots, the table that records the mode
// (table+[ModeSuffix]) and the stored procedure named
// table+[ProcSuffix], for DBAs who create them by hand (see docs/sql.md).
// The last statement, the procedure, is optional: without it (or without
// the EXECUTE privilege on it) a Driver sends two statements where it
// would send one CALL. The table name must be valid (letters, digits,
// underscores; at most 58).
func DDL(table string) ([]string, error) {
	if err := checkTable(table); err != nil {
		return nil, err
	}
	q := newStatements(table)
	return append(q.ddl, q.procDDL), nil
}

// PostgresDDL returns the PostgreSQL statements that create the lock table,
// its durable fencing-epoch table, the semaphores' table of permit slots,
// its UNLOGGED table of live token counters and the table that records
// the mode the tables are used in (table+[ModeSuffix]; advisory mode
// needs only the second, fourth and last), for
// DBAs who create them by hand (see docs/sql.md). The table name must be
// valid (letters, digits, underscores; at most 58).
func PostgresDDL(table string) ([]string, error) {
	if err := checkTable(table); err != nil {
		return nil, err
	}
	return pgDialect{}.statements(table).ddl, nil
}

// statements holds every SQL text the driver sends, built once from the
// validated, backquoted table names. A ? is a value, which bind writes in
// as a literal before the statement is sent.
type statements struct {
	table string // the lock table's name (PostgreSQL's advisory mode hashes it into each key)
	ddl   []string
	// On the pinned connection.
	beginTry  string // autocommit off and the idle timeout
	beginWait string // the same, with a session lock-wait timeout for blocking waits
	connID    string
	liveNext  string // the next token of the live counter, within its epoch
	liveSet   string // the first token of a new epoch
	// The locking read of a blocking wait and liveNext in one CALL of the
	// procedure procDDL creates (see mysqlDialect.lockOnce).
	lockNext string
	procDDL  string
	// The locking read without a result set: its OK packet counts the row.
	lockInto       string
	lockIntoNowait string
	rollback       string
	commit         string
	setIdle        string // the idle timeout (the lock's TTL) while held
	reset          string // ends the transaction and restores the session's defaults
	// On any pooled connection (autocommit).
	exists    string
	ensure    string
	fence     string // bumps the durable epoch
	fenceRow  string
	liveRow   string
	liveEvict string
	probe     string
	killQuery string
	killConn  string // ends a session (its transaction rolled back): ForceRelease
	// PostgreSQL: the table's mode (see checkMode).
	modeRead, modeSet   string
	lockTable, lockRows string
}

func newStatements(table string) *statements {
	lt := "`" + table + "`"
	ft := "`" + table + FenceSuffix + "`"
	vt := "`" + table + LiveSuffix + "`"
	return &statements{
		table:    table,
		ddl:      mysqlTables(table),
		modeRead: "SELECT mode FROM `" + table + ModeSuffix + "` WHERE id = 1",
		modeSet:  "INSERT IGNORE INTO `" + table + ModeSuffix + "` (id, mode) VALUES (1, ?)",
		// MariaDB's idle transaction timeouts (10.3+, in a MariaDB-only
		// executable comment that MySQL skips) are turned off: a DBA's
		// bound for forgotten transactions would end a lock's session, and
		// the lock, before its TTL while its holder's validity runs; the
		// lock session's idle bound is wait_timeout, the TTL.
		beginTry:  "SET SESSION autocommit = 0, wait_timeout = ?" + noIdleTx,
		beginWait: "SET SESSION autocommit = 0, wait_timeout = ?, innodb_lock_wait_timeout = ?" + noIdleTx,
		connID:    "SELECT CONNECTION_ID()",
		// Within the epoch only: at its last value the row is left alone
		// (ROW_COUNT() 0) and the caller starts a new epoch.
		liveNext: fmt.Sprintf("UPDATE %s SET token = LAST_INSERT_ID(token + 1), owner = ?, holder_id = CONNECTION_ID(), granted_at = NOW(6) "+
			"WHERE name = ? AND token & %d < %d", vt, seqMask, seqMask),
		liveSet: fmt.Sprintf("INSERT INTO %s (name, token, owner, holder_id, granted_at) VALUES (?, LAST_INSERT_ID(?), ?, CONNECTION_ID(), NOW(6)) "+
			"ON DUPLICATE KEY UPDATE token = LAST_INSERT_ID(GREATEST(token + 1, ?)), owner = ?, holder_id = CONNECTION_ID(), granted_at = NOW(6)", vt),
		lockNext:       fmt.Sprintf("CALL `%s%s`(?, ?)", table, ProcSuffix),
		procDDL:        mysqlProc(table),
		lockInto:       fmt.Sprintf("SELECT 1 INTO @distlock_found FROM %s WHERE name = ? FOR UPDATE", lt),
		lockIntoNowait: fmt.Sprintf("SELECT 1 INTO @distlock_found FROM %s WHERE name = ? FOR UPDATE NOWAIT", lt),
		rollback:       "ROLLBACK",
		commit:         "COMMIT",
		setIdle:        "SET SESSION wait_timeout = ?",
		reset:          "SET SESSION autocommit = 1, wait_timeout = DEFAULT, innodb_lock_wait_timeout = DEFAULT" + idleTxDefault,
		exists:         fmt.Sprintf("SELECT 1 FROM %s WHERE name = ?", lt),
		ensure:         fmt.Sprintf("INSERT IGNORE INTO %s (name) VALUES (?)", lt),
		fence: fmt.Sprintf("INSERT INTO %s (name, token, owner, holder_id, granted_at) "+
			"VALUES (?, LAST_INSERT_ID(1), ?, ?, NOW(6)) "+
			"ON DUPLICATE KEY UPDATE token = LAST_INSERT_ID(token + 1), owner = ?, holder_id = ?, granted_at = NOW(6)", ft),
		fenceRow:  fmt.Sprintf("SELECT token FROM %s WHERE name = ?", ft),
		liveRow:   fmt.Sprintf("SELECT token, owner, holder_id FROM %s WHERE name = ?", vt),
		liveEvict: fmt.Sprintf("DELETE FROM %s ORDER BY granted_at LIMIT %d", vt, evictRows),
		probe:     fmt.Sprintf("SELECT name FROM %s WHERE name = ? FOR UPDATE NOWAIT", lt),
		killQuery: "KILL QUERY %d", // an id the server gave us, formatted as an integer
		killConn:  "KILL CONNECTION %d",
	}
}

// mysqlTables is the DDL of table's tables: the lock table, the durable
// fencing epochs, the MEMORY table of live counters, the semaphores'
// permit slots and the mode record.
func mysqlTables(table string) []string {
	lt := "`" + table + "`"
	ft := "`" + table + FenceSuffix + "`"
	vt := "`" + table + LiveSuffix + "`"
	// The fencing epochs and the live counters have the same columns.
	grants := func(t, engine string) string {
		return fmt.Sprintf("CREATE TABLE IF NOT EXISTS %s (\n"+
			"  name       VARBINARY(%d) NOT NULL,\n"+
			"  token      BIGINT UNSIGNED NOT NULL,\n"+
			"  owner      VARBINARY(128) NOT NULL,\n"+
			"  holder_id  BIGINT UNSIGNED NOT NULL,\n"+
			"  granted_at DATETIME(6) NOT NULL,\n"+
			"  PRIMARY KEY (name)\n"+
			") ENGINE=%s", t, maxKeyLen, engine)
	}
	return []string{
		fmt.Sprintf("CREATE TABLE IF NOT EXISTS %s (\n"+
			"  name VARBINARY(%d) NOT NULL,\n"+
			"  PRIMARY KEY (name)\n"+
			") ENGINE=InnoDB", lt, maxKeyLen),
		grants(ft, "InnoDB"),
		grants(vt, "MEMORY"),
		fmt.Sprintf("CREATE TABLE IF NOT EXISTS %s (\n"+
			"  name VARBINARY(%d) NOT NULL,\n"+
			"  slot INT NOT NULL,\n"+
			"  PRIMARY KEY (name, slot)\n"+
			") ENGINE=InnoDB", "`"+table+SemSuffix+"`", maxKeyLen),
		// The table's mode (row or session, see checkModeMySQL): one
		// row, written by the first Driver on the table.
		fmt.Sprintf("CREATE TABLE IF NOT EXISTS %s (\n"+
			"  id   INT NOT NULL PRIMARY KEY,\n"+
			"  mode VARCHAR(16) NOT NULL\n"+
			") ENGINE=InnoDB", "`"+table+ModeSuffix+"`"),
	}
}

// mysqlProc is the DDL of the procedure table+[ProcSuffix] (see
// mysqlDialect.lockOnce), which returns one result row (found, token):
// found 0 when the key has no lock row; token 0 when it has no live
// counter or the counter is at the end of its epoch (the caller then
// starts a new one). Each statement of a procedure opens and locks its
// tables when it runs, so the MEMORY table is not locked while the SELECT
// waits for the row lock (a stored function would lock it for the whole
// call). SQL SECURITY INVOKER: the caller's own privileges on the tables
// apply. The NOT FOUND handler catches only "no row" (SQLSTATE 02);
// lock-wait timeouts, deadlocks and KILL QUERY end the CALL with their
// usual errors.
func mysqlProc(table string) string {
	return fmt.Sprintf("CREATE PROCEDURE IF NOT EXISTS `%[1]s%[2]s`(IN k VARBINARY(%[3]d), IN o VARBINARY(128))\n"+
		"MODIFIES SQL DATA SQL SECURITY INVOKER\n"+
		"BEGIN\n"+
		"  DECLARE f INT DEFAULT 0;\n"+
		"  DECLARE n INT DEFAULT 0;\n"+
		"  DECLARE CONTINUE HANDLER FOR NOT FOUND SET f = 0;\n"+
		"  SELECT 1 INTO f FROM `%[1]s` WHERE name = k FOR UPDATE;\n"+
		"  IF f = 1 THEN\n"+
		"    UPDATE `%[1]s%[4]s` SET token = LAST_INSERT_ID(token + 1), owner = o, holder_id = CONNECTION_ID(), granted_at = NOW(6)\n"+
		"      WHERE name = k AND token & %[5]d < %[5]d;\n"+
		"    SET n = ROW_COUNT();\n"+
		"  END IF;\n"+
		"  SELECT f, IF(n = 1, LAST_INSERT_ID(), 0);\n"+
		"END", table, ProcSuffix, maxKeyLen, LiveSuffix, seqMask)
}

// noIdleTx turns MariaDB's idle transaction timeouts off for a lock
// session; idleTxDefault restores them. /*M!100300 ...*/ is executed by
// MariaDB 10.3 and later only; MySQL and older MariaDB skip it.
const (
	noIdleTx      = " /*M!100300 , idle_transaction_timeout = 0, idle_readonly_transaction_timeout = 0, idle_write_transaction_timeout = 0 */"
	idleTxDefault = " /*M!100300 , idle_transaction_timeout = DEFAULT, idle_readonly_transaction_timeout = DEFAULT, idle_write_transaction_timeout = DEFAULT */"
)

// createTables runs the DDL (idempotent: CREATE TABLE IF NOT EXISTS).
func (d *Driver) createTables(ctx context.Context) error {
	for _, q := range d.q.ddl {
		_, err := d.db.ExecContext(ctx, q)
		if d.dia.name() == "postgres" && pgCreateRace(err) {
			_, err = d.db.ExecContext(ctx, q) // another session created it meanwhile
		}
		if err != nil {
			return fmt.Errorf("sqllock: create table: %w", d.classify(err))
		}
	}
	return nil
}
