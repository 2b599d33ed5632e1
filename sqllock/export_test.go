package sqllock

// AssumeTxTimeout makes d's lock transactions turn transaction_timeout off
// as on PostgreSQL 17 and later, whatever the server's version: a server
// without it then refuses the SET by name, which shows it is sent.
func AssumeTxTimeout(d *Driver) { d.assumeTxTimeout = true }

// VersionHasTxTimeout is pgVersionHasTxTimeout.
var VersionHasTxTimeout = pgVersionHasTxTimeout
