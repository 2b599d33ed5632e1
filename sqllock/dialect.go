package sqllock

import (
	"context"
	"database/sql"
	"time"
)

// dialect is what one SQL database does its own way. Everything else —
// the pinned connection's lifecycle, spares, the waiting loop, the
// interruption of a blocked statement, liveness by the server's idle
// timeout, the lock handle — is shared by every dialect (driver.go,
// conn.go, acquire.go, lockread.go, kill.go, lock.go, spare.go). A third
// SQL database is one more implementation, in a file of its own.
type dialect interface {
	// name is what Capabilities reports ("mysql", "postgres").
	name() string
	// maxTTL is the longest session idle timeout the server accepts;
	// maxLockWait the longest lock-wait timeout.
	maxTTL() time.Duration
	maxLockWait() time.Duration
	// statements returns every SQL text for the lock table table (a
	// validated identifier), with ? for values.
	statements(table string) *statements
	// bind writes args into q as literals of the dialect (see literal.go).
	bind(q string, args ...any) string
	// begin returns the session settings a connection needs before its
	// first locking read (ttl: idle timeout in seconds; lwt: the lock-wait
	// timeout in seconds for a blocking wait, 0 for none), or "".
	begin(q *statements, ttl, lwt int) string
	// batching reports whether c runs several statements per round trip.
	batching(ctx context.Context, d *Driver, c *sql.Conn) (bool, error)
	// connID returns the server's id of lc's session, the one cancel
	// interrupts.
	connID(ctx context.Context, lc *lockConn) (uint64, error)
	// lockOnce runs one locking read in a new transaction on lc, see
	// lockConn.lockRow.
	lockOnce(ctx context.Context, lc *lockConn, key, owner string, nowait bool) (lockResult, error)
	// token returns the fencing token of a grant just won by lc's session
	// (lr.found), committed before it is returned, and checks that the
	// session still holds the lock.
	token(ctx context.Context, lc *lockConn, key, owner string, lr lockResult) (uint64, error)
	// cancel interrupts the statement session id is running, from another
	// connection of d; an id that no longer exists is not an error.
	cancel(ctx context.Context, d *Driver, id uint64) error
	// rowExists reports whether key's lock row exists (a plain read).
	rowExists(ctx context.Context, d *Driver, key string) (bool, error)
	// lastGrant reads the last grant's token and owner for Inspect; known
	// is false when the store has no record of it (never locked, or the
	// record was lost), exists when the key was ever locked.
	lastGrant(ctx context.Context, d *Driver, key string) (g lastGrant, err error)
	// terminate ends session id from another connection of d, rolling
	// its transaction back (ForceRelease); false when there is no such
	// session.
	terminate(ctx context.Context, d *Driver, id uint64) (bool, error)

	// Errors. serverError: the server refused the request itself (the
	// connection is still usable unless connGone). conflict: another
	// session holds the row lock (NOWAIT). retryWait: a blocking wait
	// ended by the server's lock-wait timeout, a deadlock or (MySQL,
	// MariaDB) a statement time limit, to retry.
	// createRace: a statement creating rows (a lock row, semaphore
	// slots) failed because another session created them concurrently:
	// the server broke a deadlock between the two creators, or
	// (PostgreSQL under a session default of repeatable read or
	// serializable) reported the other's row, invisible to its snapshot,
	// as a serialization failure. The rows exist either way.
	// connGone: the connection is unusable and its session ends.
	serverError(err error) bool
	conflict(err error) bool
	retryWait(err error) bool
	createRace(err error) bool
	connGone(err error) bool
}

// lastGrant is what the store remembers of a key's last grant.
type lastGrant struct {
	exists bool // the key was ever locked
	known  bool // token and owner are known
	token  uint64
	owner  []byte
	holder uint64 // the server's id of the session the grant went to (known)
}

// bind writes args into q as literals of the Driver's dialect.
func (d *Driver) bind(q string, args ...any) string { return d.dia.bind(q, args...) }
