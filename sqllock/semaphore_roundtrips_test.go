package sqllock_test

import (
	"testing"
	"time"

	"github.com/distlock/distlock/backend"
	"github.com/distlock/distlock/sqllock"
)

// semPairs runs uncontended TryAcquirePermits+Release of n permits of a
// semaphore of limit permits in steady state (steadyPairs: slot creation,
// first epoch, spare in the warm-up; with pre > 0 first one grant of pre
// permits of a semaphore of pre, which leaves pre slots), and returns
// what was sent per pair.
func semPairs(t *testing.T, d *sqllock.Driver, pre, limit, n int, wc *wireCounter, kinds []byte) map[byte]float64 {
	t.Helper()
	key := uniqueKey("sem-roundtrips")
	grant := func(i, limit, n int) {
		ctx := ctxFor(t, 10*time.Second)
		g, err := d.TryAcquire(ctx, backend.Request{
			Kind: backend.Permits, Key: key, Owner: "sem-owner", TTL: 30 * time.Second,
			Limit: limit, Permits: n,
		})
		if err != nil {
			t.Fatalf("pair %d: %v", i, err)
		}
		if err := g.Lock.Release(ctx); err != nil {
			t.Fatalf("pair %d: release: %v", i, err)
		}
	}
	if pre > 0 {
		grant(-1, pre, pre)
	}
	return steadyPairs(wc, kinds, func(i int) { grant(i, limit, n) })
}

// TestSemaphoreRoundTrips: per uncontended TryAcquirePermits+Release in
// steady state, what is sent, counted on the wire. MySQL over a *sql.DB
// with go-sql-driver's defaults: five queries (SET TRANSACTION ISOLATION
// LEVEL READ COMMITTED, see TestSemaphoreNeighbourScan; the locking read
// of free slots, the count of slot rows, the live counter's increment,
// COMMIT); with multiStatements two (the first four are one batch). PostgreSQL:
// three round trips (the batch that opens the transaction, locks the free
// slots and counts the slot rows; the committed fencing increment on
// another connection, checking that the holding transaction is in
// progress, as Bind, Execute and Sync; ROLLBACK). Taking 3 permits costs
// the same as 1. When the semaphore has more slots than the asker's limit
// (someone used a larger one), counting the held slots on another
// connection adds MySQL's five queries (SET TRANSACTION, BEGIN, the
// locking read, the count, ROLLBACK), PostgreSQL's one batch.
func TestSemaphoreRoundTrips(t *testing.T) {
	type want struct{ pair, extra map[byte]float64 }
	wants := map[rowSet]want{
		mysqlProc:    {map[byte]float64{comQuery: 5}, map[byte]float64{comQuery: 10}},
		mysqlBatched: {map[byte]float64{comQuery: 2}, map[byte]float64{comQuery: 7}},
		pgRow:        {map[byte]float64{'Q': 2, 'B': 1, 'E': 1, 'S': 1}, map[byte]float64{'Q': 3, 'B': 1, 'E': 1, 'S': 1}},
	}
	eachDialect(t, mysqlProc|mysqlBatched|pgRow, func(t *testing.T, d *dialect) {
		dr, wc := d.countedDriver(t, d.server(t), "")
		w := wants[d.id]
		for _, n := range []int{1, 3} {
			got := semPairs(t, dr, 0, 4, n, wc, d.wireKinds())
			if !sameCounts(got, w.pair, d.wireKinds()) {
				t.Errorf("%d permits: sent per pair %v, want %v", n, got, w.pair)
			}
		}
		got := semPairs(t, dr, 6, 4, 1, wc, d.wireKinds())
		if !sameCounts(got, w.extra, d.wireKinds()) {
			t.Errorf("6 slots, limit 4: sent per pair %v, want %v", got, w.extra)
		}
	})
}
