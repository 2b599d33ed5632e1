package sqllock

import (
	"context"
	"fmt"
)

// AssumeTxTimeout makes d's lock transactions turn transaction_timeout off
// as on PostgreSQL 17 and later, whatever the server's version: a server
// without it then refuses the SET by name, which shows it is sent.
func AssumeTxTimeout(d *Driver) { d.assumeTxTimeout = true }

// VersionHasTxTimeout is pgVersionHasTxTimeout.
var VersionHasTxTimeout = pgVersionHasTxTimeout

// UnlockBehind unlocks key's advisory lock on the session of d (session
// mode) that holds it, behind its lease's back; false if none does.
func UnlockBehind(ctx context.Context, d *Driver, key string) (bool, error) {
	if d.sess == nil {
		return false, nil
	}
	return d.sess.unlockBehind(ctx, key)
}

// SessionWaiting reports how many connections wait in the server's queue
// for key's session-mode lock (pg_locks not granted; MySQL's processlist
// in state "User lock" on key's name).
func SessionWaiting(ctx context.Context, d *Driver, key string) (int, error) {
	k := advisoryKey(d.sess.space, key)
	var q string
	if _, ok := d.sess.sd.(*pgSessionDialect); ok {
		u := uint64(k)
		q = fmt.Sprintf("SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND objsubid = 1 AND NOT granted AND classid = %d AND objid = %d", u>>32, u&0xffffffff)
	} else {
		q = fmt.Sprintf("SELECT COUNT(*) FROM information_schema.PROCESSLIST WHERE STATE = 'User lock' AND INFO LIKE '%%%s%%'", lockName(k))
	}
	var n int
	err := d.db.QueryRowContext(ctx, q).Scan(&n)
	return n, err
}

// SetAfterGrantHook sets afterGrantHook (nil: none).
func SetAfterGrantHook(f func()) { afterGrantHook = f }

// SessionPIDs returns the server's ids of d's open shared sessions
// (session mode).
func SessionPIDs(d *Driver) []uint64 {
	d.sess.mu.Lock()
	defer d.sess.mu.Unlock()
	var ids []uint64
	for _, s := range d.sess.sessions {
		if s != nil {
			ids = append(ids, s.pid)
		}
	}
	return ids
}

// SemReadCommitted is the statement a MySQL semaphore attempt's
// transaction starts with (TestSemaphoreNeighbourScan plays such an
// attempt).
const SemReadCommitted = semReadCommitted
