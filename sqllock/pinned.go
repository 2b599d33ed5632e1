package sqllock

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/go-sql-driver/mysql"
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

// grab is the outcome of one locking attempt.
type grab struct {
	found bool   // the lock row exists and this session holds its lock
	id    uint64 // the session's CONNECTION_ID()
	token uint64 // the live counter's next token; 0 when a new epoch must start
}

// lockRow takes the lock row's exclusive row lock inside the open
// transaction and moves the key's live token counter on. The row is
// created first if missing, in its own autocommit statement on another
// connection after this transaction is rolled back (so no gap lock is held
// meanwhile, and two first-time lockers never deadlock). ctx bounds the
// locking statement, ectx the creation.
func (p *pinned) lockRow(ctx, ectx context.Context, key, owner string, nowait bool) (grab, error) {
	for range 3 {
		g, err := p.lockOnce(ctx, key, owner, nowait)
		if err != nil || g.found {
			return g, err
		}
		if _, err := p.c.ExecContext(ctx, p.d.q.rollback); err != nil {
			return grab{}, err
		}
		if err := p.d.ensure(ectx, key, nowait); err != nil {
			return grab{}, err
		}
	}
	return grab{}, errNoRow
}

// lockOnce sends the locking read, then the live counter's increment,
// which runs only once the row lock is granted (a failed read ends the
// batch) and runs on this session, so it cannot run after the session,
// and with it the lock, is gone. The first call also sends p.begin, the
// session settings, which outlast rollbacks. When the Driver batches, all
// of it is one round trip; else one statement each.
func (p *pinned) lockOnce(ctx context.Context, key, owner string, nowait bool) (grab, error) {
	q := p.d.q.lockWait
	if nowait {
		q = p.d.q.lockNowait
	}
	begin := !p.begun
	p.begun = true
	if begin {
		p.sessTTL = 0 // unknown until the settings are known to have run
	}
	var g grab
	if !p.batch {
		if begin {
			if _, err := p.c.ExecContext(ctx, p.begin, p.beginArgs...); err != nil {
				return g, err
			}
			p.setUp()
		}
		err := p.c.QueryRowContext(ctx, q, key).Scan(&g.id)
		if errors.Is(err, sql.ErrNoRows) {
			return g, nil
		}
		if err != nil {
			return g, err
		}
		g.found = true
		res, err := p.c.ExecContext(ctx, p.d.q.liveNext, owner, key)
		if err != nil {
			return g, err
		}
		if n, err := res.RowsAffected(); err != nil || n != 1 {
			return g, err // no live counter, or at the end of its epoch
		}
		tok, err := res.LastInsertId()
		g.token = uint64(tok)
		return g, err
	}
	// One batch: [settings;] locking read; increment, executed for the
	// per-statement counts of their OK packets. If the read finds no row,
	// the increment still runs; it is then discarded (moving a counter on
	// is always safe: only the tokens handed out must come from increments
	// made while holding the lock).
	if p.id == 0 { // a wait has loaded it before: a KILL may read it meanwhile
		if err := p.loadID(ctx); err != nil {
			return g, err
		}
	}
	q = p.d.q.lockInto
	if nowait {
		q = p.d.q.lockIntoNowait
	}
	args := []any{key, owner, key}
	q += "; " + p.d.q.liveNext
	if begin {
		q = p.begin + "; " + q
		args = append(slices.Clone(p.beginArgs), args...)
	}
	rows, ids, err := execBatch(ctx, p.c, q, args)
	if begin && (err == nil || isConflict(err)) {
		p.setUp() // the settings ran: a batch stops at its first failed statement
	}
	if err != nil {
		return g, err
	}
	if len(rows) < 2 {
		return g, fmt.Errorf("sqllock: a batch of statements returned %d results", len(rows))
	}
	g.id = p.id
	g.found = rows[len(rows)-2] == 1
	if g.found && rows[len(rows)-1] == 1 {
		g.token = uint64(ids[len(ids)-1])
	}
	return g, nil
}

// execBatch executes q, several statements, on c, and returns each
// statement's affected rows and insert id (go-sql-driver's mysql.Result:
// database/sql keeps only the last).
func execBatch(ctx context.Context, c *sql.Conn, q string, args []any) (rows, ids []int64, err error) {
	nv := make([]driver.NamedValue, len(args))
	for i, a := range args {
		v, err := driver.DefaultParameterConverter.ConvertValue(a)
		if err != nil {
			return nil, nil, err
		}
		nv[i] = driver.NamedValue{Ordinal: i + 1, Value: v}
	}
	err = c.Raw(func(dc any) error {
		ex, ok := dc.(driver.ExecerContext)
		if !ok {
			return fmt.Errorf("sqllock: %T cannot execute statements", dc)
		}
		res, err := ex.ExecContext(ctx, q, nv)
		if err != nil {
			return err
		}
		mr, ok := res.(mysql.Result)
		if !ok {
			return fmt.Errorf("sqllock: %T has no per-statement results", res)
		}
		rows, ids = mr.AllRowsAffected(), mr.AllLastInsertIds()
		return nil
	})
	return rows, ids, err
}

// token returns the grant's fencing token: the live counter's, or the first
// of a new epoch.
func (p *pinned) token(ctx context.Context, key, owner string, g grab) (uint64, error) {
	if g.token != 0 {
		return g.token, nil
	}
	return p.newEpoch(ctx, key, owner)
}

// newEpoch starts key's next fencing epoch while this session holds the
// row lock: the durable epoch is bumped in an autocommit statement on
// another connection (committed, so neither a rollback nor a server
// restart undoes it, before any token of the epoch is handed out), then
// the live counter is set to the epoch's first token on the pinned
// connection, whose answer shows that the session, and so the row lock,
// is alive. Every token of earlier epochs is smaller, whatever the live
// counter held before (a restart emptied it, or it was evicted).
func (p *pinned) newEpoch(ctx context.Context, key, owner string) (uint64, error) {
	e, err := p.d.fence(ctx, key, owner, p.id)
	if err != nil {
		return 0, err
	}
	if e >= 1<<(63-seqBits) {
		return 0, fmt.Errorf("sqllock: fencing epoch %d of %q is beyond the largest (%d)", e, key, uint64(1)<<(63-seqBits)-1)
	}
	first := e<<seqBits | 1
	for evicted := false; ; evicted = true {
		res, err := p.c.ExecContext(ctx, p.d.q.liveSet, key, first, owner, first, owner)
		switch {
		case err == nil:
			tok, err := res.LastInsertId()
			return uint64(tok), err
		case serverCode(err) == errTableFull && !evicted:
			// Forgetting live counters is always safe: a key without one
			// starts a new epoch at its next grant.
			if _, err := p.d.db.ExecContext(ctx, p.d.q.liveEvict); err != nil {
				return 0, err
			}
		case serverCode(err) == errTableFull:
			// No room: the key goes on without a live counter, so its next
			// grant starts another epoch. The session answered: it is
			// alive and holds the lock.
			return first, nil
		default:
			return 0, err
		}
	}
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
	ictx := ctx
	if nowait {
		var cancel context.CancelFunc
		ictx, cancel = context.WithTimeout(ctx, ensureWait)
		defer cancel()
	}
	err = d.insertRow(ictx, key)
	switch {
	case err == nil, serverCode(err) == errDeadlock:
		return nil
	case nowait && ctx.Err() == nil && errors.Is(ictx.Err(), context.DeadlineExceeded):
		return nil // the row exists and is locked: the next locking read says so
	}
	return err
}

// insertRow runs the row's INSERT IGNORE on a connection of its own until
// ctx ends, when the statement is interrupted in the server with KILL
// QUERY: a client that merely hung up would leave it waiting there for the
// row lock, and running (briefly locking the row) just after its holder
// released it.
func (d *Driver) insertRow(ctx context.Context, key string) error {
	c, err := d.db.Conn(ctx)
	if err != nil {
		return err
	}
	p := &pinned{d: d, c: c, raw: rawConn(c)}
	if err := p.loadID(ctx); err != nil {
		p.discard()
		return err
	}
	var killed bool
	err = p.interruptible(ctx, func(sctx context.Context) error {
		_, err := c.ExecContext(sctx, d.q.ensure, key)
		return err
	}, &killed)
	if killed {
		p.discard() // a KILL may have come after the statement ended
		if err == nil {
			return nil
		}
		return fmt.Errorf("%w (%w)", context.Cause(ctx), err)
	}
	if err != nil {
		p.discard()
		return err
	}
	return c.Close()
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
func (p *pinned) blockingLock(ctx context.Context, key, owner string) (grab, error) {
	var g grab
	err := p.interruptible(ctx, func(sctx context.Context) error {
		var err error
		g, err = p.lockRow(sctx, ctx, key, owner, false)
		return err
	}, nil)
	return g, err
}

// interruptible runs fn with a context that outlives ctx; when ctx ends
// first, the statement fn is running is interrupted with KILL QUERY from
// another connection, and if that cannot be sent, or does not end fn
// within killGrace, fn's context is canceled (the driver then closes the
// connection). It returns once no KILL can reach a later statement of the
// connection, and sets *killed (when not nil) if ctx ended while fn ran.
func (p *pinned) interruptible(ctx context.Context, fn func(sctx context.Context) error, killed *bool) error {
	sctx, scancel := context.WithCancel(context.WithoutCancel(ctx))
	defer scancel()
	returned, done := make(chan struct{}), make(chan struct{})
	stop := context.AfterFunc(ctx, func() {
		defer close(done)
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
	err := fn(sctx)
	close(returned)
	if !stop() {
		<-done // no KILL may reach a later statement of this connection
		if killed != nil {
			*killed = true
		}
	}
	return err
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

// fence increments key's durable fencing epoch in its own autocommit
// statement (committed before any token of the epoch is handed out, so
// neither a rollback of the lock transaction nor a server restart undoes
// it) and records the holder. It runs while the row lock is held, so
// increments are ordered like the holds.
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
