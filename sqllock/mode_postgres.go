package sqllock

import (
	"context"
	"fmt"
	"strings"

	"github.com/distlock/distlock/backend"
)

// The table's mode on PostgreSQL (row, advisory or session), recorded in
// the mode table so that Drivers that lock different things never share a
// table.

// mode is the table's mode that checkMode records: "row", or "advisory"
// (pgAdvisory).
func (pgDialect) mode() string { return "row" }

// checkMode makes sure every Driver on the table locks the same way. Row
// mode locks a row of the lock table, advisory mode an advisory lock: a
// client of each would both hold one key. The first Driver records its
// mode in the mode table (table+ModeSuffix); one of the other mode is
// refused with ErrInvalidConfig. An advisory-mode Driver that would record
// first while the lock table has rows refuses too: row-mode clients of a
// version that records no mode may be running on it.
func checkMode(ctx context.Context, d *Driver, mode string) error {
	read := func(q string) (string, bool, error) {
		res, err := pgExecDB(ctx, d, q)
		if err != nil {
			return "", false, err
		}
		last := res[len(res)-1]
		if len(last.Rows) == 0 {
			return "", false, nil
		}
		return string(last.Rows[0][0]), true, nil
	}
	mt := d.q.table + ModeSuffix
	got, ok, err := read(d.q.modeRead)
	if pgCode(err) == pgUndefinedTable {
		return fmt.Errorf("sqllock: %w: the mode table %q is missing (tables created by hand from an earlier PostgresDDL): create it, see PostgresDDL and docs/sql.md", backend.ErrInvalidConfig, mt)
	}
	if err == nil && !ok {
		if mode != "row" {
			if err = d.refuseRowRows(ctx, mt, mode); err != nil {
				return err
			}
		}
		got, ok, err = read(strings.Replace(d.q.modeSet, "?", "'"+mode+"'", 1)) // row or advisory: ours, not input
	}
	if err != nil {
		return fmt.Errorf("sqllock: the table's mode (%s): %w", mt, d.classify(err))
	}
	if !ok {
		return fmt.Errorf("sqllock: the table's mode (%s): no row after recording it", mt)
	}
	if got != mode {
		return fmt.Errorf("sqllock: %w: table %q is used in %s mode (recorded in %q) and this Driver is in %s mode: "+
			"the two lock different things, so a client of each would both hold a key; use one mode per table (docs/sql.md)",
			backend.ErrInvalidConfig, d.q.table, got, mt, mode)
	}
	return nil
}

// refuseRowRows refuses to record advisory mode on a table whose lock
// table has rows: row-mode clients were there, and may still run.
func (d *Driver) refuseRowRows(ctx context.Context, mt, mode string) error {
	rows := pgDialect{}.statements(d.q.table)
	for _, q := range []string{rows.lockTable, rows.lockRows} {
		res, err := pgExecDB(ctx, d, q)
		if err != nil {
			return fmt.Errorf("sqllock: the table's mode (%s): %w", mt, d.classify(err))
		}
		if len(res) == 0 || len(res[0].Rows) == 0 || string(res[0].Rows[0][0]) != "t" {
			return nil
		}
	}
	return fmt.Errorf("sqllock: %w: table %q records no mode and its lock table has rows, so clients in row mode "+
		"(of a version that records no mode) may be running on it; this Driver is in %s mode, and a client of each "+
		"would both hold a key: stop the row-mode clients, then record the mode (INSERT INTO %q VALUES (1, '%s')), see docs/sql.md",
		backend.ErrInvalidConfig, d.q.table, mode, mt, mode)
}
