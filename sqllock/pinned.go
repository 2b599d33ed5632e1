package sqllock

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"
	"time"
)

// pinned is a connection checked out of the pool for one acquisition and,
// once granted, for the life of the lock.
type pinned struct {
	d   *Driver
	c   *sql.Conn
	raw any    // the driver's connection, to remember id across checkouts
	id  uint64 // the server's CONNECTION_ID(), once known
}

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

// giveBack ends the transaction (a COMMIT by switching autocommit back on;
// the transaction changed nothing), restores the session's defaults and
// returns the connection to the pool; if that fails the connection is
// discarded.
func (p *pinned) giveBack(ctx context.Context) error {
	if _, err := p.c.ExecContext(ctx, p.d.q.reset); err != nil {
		p.discard()
		return err
	}
	return p.c.Close()
}

// lockRow takes the lock row's exclusive row lock inside the open
// transaction and returns the connection's id. The row is created first if
// missing, in its own autocommit statement on another connection after
// this transaction is rolled back (so no gap lock is held meanwhile, and
// two first-time lockers never deadlock). ctx bounds the locking
// statement, ectx the creation.
func (p *pinned) lockRow(ctx, ectx context.Context, key string, nowait bool) (uint64, error) {
	q := p.d.q.lockWait
	if nowait {
		q = p.d.q.lockNowait
	}
	for range 3 {
		var id uint64
		err := p.c.QueryRowContext(ctx, q, key).Scan(&id)
		if !errors.Is(err, sql.ErrNoRows) {
			return id, err
		}
		if _, err := p.c.ExecContext(ctx, p.d.q.rollback); err != nil {
			return 0, err
		}
		if err := p.d.ensure(ectx, key, nowait); err != nil {
			return 0, err
		}
	}
	return 0, errNoRow
}

// ensureWait bounds the row creation of a NOWAIT acquisition: the INSERT
// waits only if another session created the row and locked it meanwhile,
// and then the locking read that follows reports the conflict.
const ensureWait = 250 * time.Millisecond

// ensure creates key's row if it does not exist. A plain read first (it
// takes no lock and never waits) skips the INSERT when another session has
// created the row meanwhile; the INSERT IGNORE would wait for that
// session's row lock to check the duplicate.
func (d *Driver) ensure(ctx context.Context, key string, nowait bool) error {
	var one int
	err := d.db.QueryRowContext(ctx, d.q.exists, key).Scan(&one)
	if err == nil {
		return nil
	}
	if !errors.Is(err, sql.ErrNoRows) {
		return err
	}
	if nowait {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, ensureWait)
		defer cancel()
	}
	_, err = d.db.ExecContext(ctx, d.q.ensure, key)
	switch {
	case err == nil, serverCode(err) == errDeadlock:
		return nil
	case nowait && errors.Is(ctx.Err(), context.DeadlineExceeded):
		return nil // the row exists and is locked: the next locking read says so
	}
	return err
}

// killGrace is how long a waiter whose ctx ended waits for KILL QUERY to
// interrupt its blocked statement before closing the connection instead.
const killGrace = 5 * time.Second

// blockingLock is lockRow without NOWAIT, honouring ctx: when ctx ends,
// the blocked statement is interrupted with KILL QUERY from another
// connection, so the session stays usable and nothing waits on in the
// server. If the KILL cannot be sent, the statement's own context is
// canceled, which makes the driver close the connection (the server then
// ends the session once it notices). The statement may still have won the
// lock in the meantime: the caller checks ctx and releases it.
func (p *pinned) blockingLock(ctx context.Context, key string) (uint64, error) {
	sctx, scancel := context.WithCancel(context.WithoutCancel(ctx))
	defer scancel()
	returned, killed := make(chan struct{}), make(chan struct{})
	stop := context.AfterFunc(ctx, func() {
		defer close(killed)
		if err := p.d.killQuery(p.id); err != nil {
			scancel()
			return
		}
		t := time.NewTimer(killGrace)
		defer t.Stop()
		select {
		case <-returned:
		case <-t.C:
			scancel()
		}
	})
	id, err := p.lockRow(sctx, ctx, key, false)
	close(returned)
	if !stop() {
		<-killed // no KILL may reach a later statement of this connection
	}
	return id, err
}

// killQuery interrupts whatever connection id is running, from a pooled
// connection. An id that no longer exists is not an error.
func (d *Driver) killQuery(id uint64) error {
	ctx, cancel := context.WithTimeout(context.Background(), killGrace)
	defer cancel()
	_, err := d.db.ExecContext(ctx, fmt.Sprintf(d.q.killQuery, id))
	if serverCode(err) == 1094 { // ER_NO_SUCH_THREAD
		return nil
	}
	return err
}

// fence increments key's fencing counter in its own autocommit statement
// (committed before the grant is returned, so a rollback of the lock
// transaction never undoes it) and records the holder. It runs while the
// row lock is held, so increments are ordered like the holds.
func (d *Driver) fence(ctx context.Context, key, owner string, id uint64) (uint64, error) {
	res, err := d.db.ExecContext(ctx, d.q.fence, key, owner, id, owner, id)
	if err != nil {
		return 0, err
	}
	n, err := res.LastInsertId()
	if err != nil {
		return 0, err
	}
	if n <= 0 {
		return 0, fmt.Errorf("sqllock: fencing counter returned %d", n)
	}
	return uint64(n), nil
}
