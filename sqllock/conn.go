package sqllock

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"time"
)

// pinned is a connection checked out of the pool for one acquisition and,
// once granted, for the life of the lock.
type pinned struct {
	d   *Driver
	c   *sql.Conn
	raw any    // the driver's connection, to remember id across checkouts
	id  uint64 // the server's CONNECTION_ID(), once known

	batch     bool   // several statements per round trip
	begin     string // session settings, sent with the first locking read
	beginArgs []any
	beginTTL  int  // the wait_timeout begin sets
	beginLWT  bool // begin sets innodb_lock_wait_timeout
	begun     bool // the session has the settings begin sends

	// The lock session's settings in place (autocommit off, wait_timeout
	// sessTTL, innodb_lock_wait_timeout if sessLWT); sessTTL 0 when not
	// known to be. Only a connection in a known state becomes a spare.
	sessTTL    int
	sessLWT    bool
	spareUntil time.Time // a spare: restored to the pool at this time
}

// setUp records that the session settings of begin are in place.
func (p *pinned) setUp() { p.sessTTL, p.sessLWT = p.beginTTL, p.beginLWT }

// rawConn returns c's driver connection (nil if c is already closed).
func rawConn(c *sql.Conn) any {
	var raw any
	_ = c.Raw(func(dc any) error { raw = dc; return nil })
	return raw
}

// loadID learns the connection's server id, needed to interrupt a blocked
// wait, from the Driver's memory or by asking.
func (p *pinned) loadID(ctx context.Context) error {
	if id, ok := p.d.ids.get(p.raw); ok {
		p.id = id
		return nil
	}
	if err := p.c.QueryRowContext(ctx, p.d.q.connID).Scan(&p.id); err != nil {
		return err
	}
	p.d.ids.put(p.raw, p.id)
	return nil
}

// discard closes the connection instead of returning it to the pool: its
// state (transaction, session variables) is unknown or unwanted. Closing
// it ends the session, so the server rolls back and frees the row.
func (p *pinned) discard() {
	p.d.ids.forget(p.raw)
	_ = p.c.Raw(func(any) error { return driver.ErrBadConn })
	_ = p.c.Close()
}

// giveBack ends the transaction (it changed nothing) and keeps the
// connection as a spare (see spare.go), or restores the session's defaults
// (a COMMIT by switching autocommit back on) and returns it to the pool;
// if that fails the connection is discarded.
func (p *pinned) giveBack(ctx context.Context) error {
	if p.sessTTL > 0 && p.d.spareRoom() {
		if _, err := p.c.ExecContext(ctx, p.d.q.commit); err != nil {
			p.discard()
			return err
		}
		if p.d.keep(p) {
			return nil
		}
	}
	return p.reset(ctx)
}

// reset restores the session's defaults (ending any transaction: switching
// autocommit on commits) and returns the connection to the pool; if that
// fails the connection is discarded.
func (p *pinned) reset(ctx context.Context) error {
	if _, err := p.c.ExecContext(ctx, p.d.q.reset); err != nil {
		p.discard()
		return err
	}
	return p.c.Close()
}
