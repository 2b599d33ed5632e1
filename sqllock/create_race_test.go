package sqllock_test

import (
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/distlock/distlock/sqllock"
)

// TestConcurrentNew: replicas of a service starting at once against a
// database the lock table is new to all run New at the same moment, and
// each must get a Driver: the loser of a CREATE ... IF NOT EXISTS race
// (on PostgreSQL a unique violation in the catalog, or "type ... already
// exists") is not an error for it. Rounds on fresh tables, every row.
func TestConcurrentNew(t *testing.T) {
	eachDialect(t, allRows|sessionRows, func(t *testing.T, d *dialect) {
		s := d.server(t)
		const rounds, replicas = 6, 6
		for r := range rounds {
			table := "distlock_test_race_" + d.mode[:3] + "_" + strings.TrimPrefix(uniqueKey(""), "sqllock-test--")
			opts := d.options(sqllock.Options{Table: table})
			var wg sync.WaitGroup
			errs := make([]error, replicas)
			start := make(chan struct{})
			for i := range replicas {
				wg.Go(func() {
					db := s.newDB(s.addr, d.m.batch)
					defer db.Close()
					<-start
					o := opts
					dr, err := sqllock.New(ctxFor(t, 60*time.Second), db, &o)
					if err == nil {
						err = dr.Close()
					}
					errs[i] = err
				})
			}
			close(start)
			wg.Wait()
			for i, err := range errs {
				if err != nil {
					t.Errorf("round %d: replica %d of %d starting at once on new table %s: New: %v", r, i, replicas, table, err)
				}
			}
		}
	})
}
