package sqllock_test

import (
	"testing"
	"time"

	"github.com/distlock/distlock/sqllock"
)

// TestSemaphoreNeighbourScan: a semaphore attempt that finds its own
// slots taken scans on past them, to the next slot row of the table's
// index, which is another semaphore's (its name the next in order). The
// attempt in flight (a transaction of its own, as the driver's attempts
// are; kept open here, as a contended neighbour's attempts are open one
// after the other) must not make the other semaphore's free permit look
// taken: a TryAcquire there is granted. Under REPEATABLE READ, InnoDB
// locked that row with the scan (a next-key lock), SKIP LOCKED then
// skipped it, and the try failed with ErrNotAcquired with every permit
// free (conformance SemaphoreLimitChange beside SemaphoreLimit, in the
// container pass).
func TestSemaphoreNeighbourScan(t *testing.T) {
	eachDialect(t, allMySQL, func(t *testing.T, d *dialect) {
		s := d.server(t)
		l, _ := d.newLocker(t, s, 30*time.Second, sqllock.Options{})
		full := uniqueKey("neighbour")
		next := full + "x" // the next name in the slot index's order
		sf, err := l.Semaphore(full, 1)
		if err != nil {
			t.Fatal(err)
		}
		sn, err := l.Semaphore(next, 1)
		if err != nil {
			t.Fatal(err)
		}
		// Both semaphores' slot rows exist: take and give back a permit of next.
		le, err := sn.TryAcquire(ctxFor(t, 10*time.Second))
		if err != nil {
			t.Fatalf("TryAcquire of %q: %v", next, err)
		}
		release(t, le)
		held, err := sf.TryAcquire(ctxFor(t, 10*time.Second))
		if err != nil {
			t.Fatalf("TryAcquire of %q: %v", full, err)
		}
		defer release(t, held)
		// A neighbour's attempt in flight, as the driver makes it (its
		// transaction's isolation, its locking read): full's slot is
		// held, so its scan goes on to the next row.
		conn, err := s.admin.Conn(ctxFor(t, 10*time.Second))
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		if _, err := conn.ExecContext(ctxFor(t, 10*time.Second), sqllock.SemReadCommitted); err != nil {
			t.Fatal(err)
		}
		tx, err := conn.BeginTx(ctxFor(t, 10*time.Second), nil)
		if err != nil {
			t.Fatal(err)
		}
		defer func() { _ = tx.Rollback() }()
		rows, err := tx.QueryContext(ctxFor(t, 10*time.Second),
			"SELECT slot FROM `"+d.table()+"_sem` WHERE name = ? AND slot < 1 ORDER BY slot LIMIT 1 FOR UPDATE SKIP LOCKED", full)
		if err != nil {
			t.Fatal(err)
		}
		n := 0
		for rows.Next() {
			n++
		}
		if err := rows.Close(); err != nil {
			t.Fatal(err)
		}
		if n != 0 {
			t.Fatalf("the neighbour's scan found %d free slots of %q, want 0 (it is held)", n, full)
		}
		le, err = sn.TryAcquire(ctxFor(t, 10*time.Second))
		if err != nil {
			t.Fatalf("TryAcquire of %q (its one permit free) while an attempt on %q scans past its own slots: %v", next, full, err)
		}
		release(t, le)
	})
}
