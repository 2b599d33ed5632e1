package sqllock

import "context"

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
