package sqllock

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"time"
)

// lockConn is a connection checked out of the pool for one acquisition and,
// once granted, for the life of the lock.
type lockConn struct {
	d   *Driver
	c   *sql.Conn
	raw any    // the driver's connection, to remember id across checkouts
	id  uint64 // the server's CONNECTION_ID(), once known

	lock     lockFunc // the locking attempt; nil: the dialect's mutex
	batch    bool     // several statements per round trip
	begin    string   // session settings, sent with the first locking read
	beginTTL int      // the idle timeout (seconds) begin sets
	beginLWT bool     // begin sets innodb_lock_wait_timeout
	begun    bool     // the session has the settings begin sends
	// PostgreSQL: whether the server has transaction_timeout (17+): 0
	// not known yet, 1 yes, 2 no (see pgHasTxTimeout).
	txTimeout int8

	// The lock session's settings in place (autocommit off, wait_timeout
	// sessTTL, innodb_lock_wait_timeout if sessLWT); sessTTL 0 when not
	// known to be. Only a connection in a known state becomes a spare.
	sessTTL    int
	sessLWT    bool
	spareUntil time.Time // a spare: restored to the pool at this time
}

// setUp records that the session settings of begin are in place.
func (lc *lockConn) setUp() { lc.sessTTL, lc.sessLWT = lc.beginTTL, lc.beginLWT }

// rawConn returns c's driver connection (nil if c is already closed).
func rawConn(c *sql.Conn) any {
	var raw any
	_ = c.Raw(func(dc any) error { raw = dc; return nil })
	return raw
}

// loadID learns the connection's server id, needed to interrupt a blocked
// wait.
func (lc *lockConn) loadID(ctx context.Context) error {
	id, err := lc.d.dia.connID(ctx, lc)
	if err != nil {
		return err
	}
	lc.id = id
	return nil
}

// discard closes the connection instead of returning it to the pool: its
// state (transaction, session variables) is unknown or unwanted. Closing
// it ends the session, so the server rolls back and frees the row.
func (lc *lockConn) discard() {
	lc.d.ids.forget(lc.raw)
	_ = lc.c.Raw(func(any) error { return driver.ErrBadConn })
	_ = lc.c.Close()
}

// giveBack ends the transaction (it changed nothing) and keeps the
// connection as a spare (see spare.go), or restores the session's defaults
// (a COMMIT by switching autocommit back on) and returns it to the pool;
// if that fails the connection is discarded.
func (lc *lockConn) giveBack(ctx context.Context) error {
	if lc.sessTTL > 0 && lc.d.spareRoom() {
		if _, err := lc.c.ExecContext(ctx, lc.d.q.commit); err != nil {
			lc.discard()
			return err
		}
		if lc.d.keep(lc) {
			return nil
		}
	}
	return lc.reset(ctx)
}

// reset restores the session's defaults (ending any transaction: switching
// autocommit on commits) and returns the connection to the pool; if that
// fails the connection is discarded.
func (lc *lockConn) reset(ctx context.Context) error {
	if _, err := lc.c.ExecContext(ctx, lc.d.q.reset); err != nil {
		lc.discard()
		return err
	}
	return lc.c.Close()
}
