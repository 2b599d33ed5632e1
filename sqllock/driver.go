package sqllock

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"math"
	"sync"
	"sync/atomic"
	"time"

	"github.com/distlock/distlock/backend"
	"github.com/jackc/pgx/v5/pgxpool"
)

// Driver is a distlock backend over one MySQL, MariaDB or PostgreSQL server. Each held
// lock pins one connection of the *sql.DB with an open transaction that
// holds the lock row's exclusive row lock. It implements [backend.Driver]
// for the mutex, read-write locks and semaphores, [backend.Waiter] for the
// mutex and read-write locks, and [backend.Inspector] for the mutex; it is
// safe for concurrent use.
type Driver struct {
	routes // the entry points (kinds.go)

	db      *sql.DB
	ownDB   bool   // opened from a URL: Close closes it
	onClose func() // run by Close (a URL's TLS configuration to deregister), or nil
	dia     dialect
	server  string // host:port for telemetry (Options.Server)
	// noSpares: keep no spare connection (a pgxpool has its own limit).
	noSpares bool
	// pool is NewPool's pgxpool, whose use a connection wait that timed
	// out reports (conn); nil otherwise.
	pool *pgxpool.Pool
	q    *statements
	lwt  int // session innodb_lock_wait_timeout in seconds, 0 = server's
	// assumeTxTimeout (tests): send transaction_timeout's SET whatever
	// server_version says (see pgHasTxTimeout).
	assumeTxTimeout bool

	// sess is session mode's state (session.go), nil in the other modes.
	sess *sessionMode

	ids   connIDs
	batch atomic.Int32 // batchUnknown, batchYes or batchNo
	proc  atomic.Int32 // procUnknown, procYes or procNo: CALL the procedure (proc.go)

	mu         sync.Mutex
	closed     bool
	held       backend.HeldSet[*lock] // held, not yet released
	spares     []*lockConn            // idle connections kept for the next lock (spare.go)
	spareTimer *time.Timer            // runs trimSpares
	spareAt    time.Time              // when spareTimer fires; zero if it is not set
	spareWG    sync.WaitGroup         // a trimSpares running
}

var (
	_ backend.Driver    = (*Driver)(nil)
	_ backend.Waiter    = (*Driver)(nil)
	_ backend.Inspector = (*Driver)(nil)
)

// New returns a Driver over db, a *sql.DB of github.com/go-sql-driver/mysql
// (MySQL, MariaDB) or of github.com/jackc/pgx/v5/stdlib (PostgreSQL; see
// also [NewPool]): the dialect follows db's driver. opts may be nil (defaults); New never modifies it. It creates the lock
// tables if missing (unless opts.NoCreateTable), bounded by ctx. The Driver
// never closes db: the caller does, after closing the Driver (which returns
// the Driver's spare connections to db). Each held lock and each waiter
// uses one of db's connections, and every acquisition briefly needs one
// more: a db.SetMaxOpenConns below the number of concurrent acquisitions
// plus one makes acquisitions wait for a free connection. While db has no
// connection limit, the Driver also keeps up to 8 idle spare connections
// (see the package doc).
//
// db needs nothing beyond its library's defaults (a DSN or connection
// string alone will do): every statement is bounded by a ctx, which both
// libraries honour by closing the connection when it ends (go-sql-driver's
// readTimeout may stay 0; pgx's default ctx handling). So that this does
// not close a held lock's connection when a caller gives up on a Refresh,
// the refresh statement's own ctx ends at the session's idle bound, not
// the caller's (see the package doc); the portable layer ends the lease at
// its deadline in any case.
func New(ctx context.Context, db *sql.DB, opts *Options) (*Driver, error) {
	if db == nil {
		return nil, fmt.Errorf("sqllock: %w: nil *sql.DB", backend.ErrInvalidConfig)
	}
	var name string
	if opts != nil {
		name = opts.Dialect
	}
	dia, err := dialectFor(ctx, db, name)
	if err != nil {
		return nil, err
	}
	return newDriver(ctx, db, dia, opts)
}

// newDriver is New in the given dialect.
func newDriver(ctx context.Context, db *sql.DB, dia dialect, opts *Options) (*Driver, error) {
	var o Options
	if opts != nil {
		o = *opts
	}
	if o.Table == "" {
		o.Table = DefaultTable
	}
	if err := checkOptions(ctx, db, dia, o); err != nil {
		return nil, err
	}
	dia, err := modeDialect(dia, o)
	if err != nil {
		return nil, err
	}
	if o.LockWaitTimeout > dia.maxLockWait() {
		// The server would cut it down to its maximum with only a warning.
		return nil, fmt.Errorf("sqllock: %w: LockWaitTimeout %v is above the server's maximum lock-wait timeout (%v)",
			backend.ErrInvalidConfig, o.LockWaitTimeout, dia.maxLockWait())
	}
	d := &Driver{db: db, dia: dia, q: dia.statements(o.Table), server: o.Server}
	d.routes = byKind.Waiting(d)
	if o.LockWaitTimeout > 0 {
		d.lwt = seconds(o.LockWaitTimeout)
	}
	if !o.NoCreateTable {
		if err := d.createTables(ctx); err != nil {
			if re := refused(err); re != nil {
				// Not the CREATE TABLE's fault: the connection was refused.
				return nil, fmt.Errorf("sqllock: connect: %w", re)
			}
			return nil, err
		}
	}
	if err := d.checkTableMode(ctx, o); err != nil {
		return nil, err
	}
	if o.Session {
		sm, err := newSessionMode(ctx, d, o)
		if err != nil {
			return nil, err
		}
		d.sess, d.routes = sm, sessionKinds.Waiting(d)
		return d, nil
	}
	if err := d.setUpProc(ctx, o); err != nil {
		return nil, err
	}
	return d, nil
}

// checkOptions refuses a table name, a Dialect and a LockWaitTimeout that
// o cannot have with connections of dia.
func checkOptions(ctx context.Context, db *sql.DB, dia dialect, o Options) error {
	if err := checkTable(o.Table); err != nil {
		return fmt.Errorf("sqllock: %w", err)
	}
	if o.Dialect != "" {
		named, err := dialectFor(ctx, db, o.Dialect)
		if err != nil {
			return err
		}
		if named.name() != dia.name() {
			return fmt.Errorf("sqllock: %w: Dialect %q, but the connections are %s's", backend.ErrInvalidConfig, o.Dialect, dia.name())
		}
	}
	if o.LockWaitTimeout < 0 {
		return fmt.Errorf("sqllock: %w: negative LockWaitTimeout %v", backend.ErrInvalidConfig, o.LockWaitTimeout)
	}
	return nil
}

// modeDialect is the dialect of o's mode (Advisory, Session) on a
// database of dia.
func modeDialect(dia dialect, o Options) (dialect, error) {
	if o.Advisory {
		if _, ok := dia.(pgDialect); !ok {
			return nil, fmt.Errorf("sqllock: %w: Advisory is PostgreSQL's (pg_advisory_xact_lock); this *sql.DB is %s's", backend.ErrInvalidConfig, dia.name())
		}
		dia = pgAdvisory{}
	}
	if o.Session {
		if o.Advisory {
			return nil, fmt.Errorf("sqllock: %w: Advisory and Session are two modes: choose one", backend.ErrInvalidConfig)
		}
		switch dia.(type) {
		case pgDialect:
			dia = pgSession{}
		case mysqlDialect:
			dia = mysqlSession{}
		default:
			return nil, fmt.Errorf("sqllock: %w: no session mode for %s", backend.ErrInvalidConfig, dia.name())
		}
	}
	return dia, nil
}

// checkTableMode makes sure the table is used in d's mode only, recording
// the mode where the table records none yet (checkModeMySQL, checkMode).
func (d *Driver) checkTableMode(ctx context.Context, o Options) error {
	switch d.dia.(type) {
	case mysqlDialect:
		// With NoCreateTable, New sends nothing in row mode (a DBA's
		// tables, a server not reached yet): a session-mode table is then
		// refused by its own clients only, see docs/sql.md.
		if o.NoCreateTable {
			break
		}
		if err := checkModeMySQL(ctx, d, "row"); err != nil {
			return err
		}
	case mysqlSession:
		if err := checkModeMySQL(ctx, d, "session"); err != nil {
			return err
		}
	default:
		if m, ok := d.dia.(interface{ mode() string }); ok {
			if err := checkMode(ctx, d, m.mode()); err != nil {
				return err
			}
		}
	}
	return nil
}

// seconds rounds d up to whole seconds, at least 1: the unit of the
// server's timeouts. Rounding up keeps the server's bound at or beyond the
// client's, never before it.
func seconds(d time.Duration) int {
	s := int(math.Ceil(d.Seconds()))
	return max(s, 1)
}

// Capabilities reports what the store offers.
func (d *Driver) Capabilities() backend.Capabilities {
	c := backend.Capabilities{
		Name:        d.dia.name(),
		Wait:        backend.WaitQueue,
		Lifetime:    backend.LifetimeConnection,
		PerLockTTL:  true,
		MinTTL:      time.Second,
		MaxTTL:      d.dia.maxTTL(),
		MaxKeyLen:   maxKeyLen,
		Fair:        false,
		Replication: "single server: row locks are not replicated, a failover to a replica loses every lock",
		Server:      d.serverInfo(), // endpoint.go
		Inspect:     true,           // inspect.go
		// force.go: ends the holder's session (not in session mode, whose
		// sessions are shared by many leases)
		ForceRelease: d.sess == nil,
	}
	if d.sess != nil {
		// A lease lives as long as its session's connection (closed: freed
		// at once) and its own TTL (the session's idle timeout is at least
		// the longest TTL of its leases).
		c.BatchRefresh = true
		c.Replication = "single server: advisory locks are not replicated, a failover to a replica loses every lock"
		return c // no semaphores, no read-write locks
	}
	if d.semDia() != nil {
		c.Semaphore = backend.WaitPoll // semaphore.go: SKIP LOCKED never waits
	}
	if _, ok := d.dia.(rwDialect); ok {
		c.RW = backend.WaitQueue // rwlock.go: waiters queue in the server
	}
	return c
}

// Close abandons every lock still held by closing its connection (the
// server rolls the transaction back and frees the row), and closes the
// *sql.DB if the Driver opened it from a URL.
func (d *Driver) Close() error {
	d.mu.Lock()
	if d.closed {
		d.mu.Unlock()
		return fmt.Errorf("sqllock: close: %w", backend.ErrClosed)
	}
	d.closed = true
	d.mu.Unlock()
	if d.sess != nil {
		d.sess.close()
	}
	for _, l := range d.held.End(backend.ErrClosed) {
		l.abandon()
	}
	d.dropSpares()
	if d.onClose != nil {
		d.onClose()
	}
	if d.ownDB {
		return d.db.Close()
	}
	return nil
}

// conn checks a connection out of d's pool. When ctx ends before one is
// free and every connection of a bounded pool is in use, the error says
// so: a pool too small for the locks held and waited for (each pins a
// connection, and an acquisition needs one more for a moment) would
// otherwise read as a store that did not answer.
func (d *Driver) conn(ctx context.Context) (*sql.Conn, error) {
	c, err := d.db.Conn(ctx)
	if err != nil && ctx.Err() != nil {
		if full := d.poolFull(); full != "" {
			return nil, fmt.Errorf("no free connection within the ctx: %s (each held lock and each waiter pins one, and an acquisition needs one more for a moment: see docs/sql.md, Connections): %w", full, err)
		}
	}
	return c, err
}

// poolFull describes d's pool if every connection of it is in use, else
// returns "".
func (d *Driver) poolFull() string {
	if d.pool != nil {
		st := d.pool.Stat()
		if st.AcquiredConns() >= st.MaxConns() {
			return fmt.Sprintf("the pgxpool has %d of %d connections in use (MaxConns)", st.AcquiredConns(), st.MaxConns())
		}
		return ""
	}
	st := d.db.Stats()
	if st.MaxOpenConnections > 0 && st.InUse >= st.MaxOpenConnections {
		return fmt.Sprintf("the *sql.DB has %d of %d connections in use (SetMaxOpenConns)", st.InUse, st.MaxOpenConnections)
	}
	return ""
}

// pin returns a connection to pin for one acquisition: a spare, or one
// checked out of the pool.
func (d *Driver) pin(ctx context.Context, op, key string) (*lockConn, error) {
	d.mu.Lock()
	closed := d.closed
	d.mu.Unlock()
	if closed {
		return nil, fmt.Errorf("sqllock: %s %q: %w", op, key, backend.ErrClosed)
	}
	if lc := d.spare(ctx); lc != nil {
		return lc, nil
	}
	c, err := d.conn(ctx)
	if err != nil {
		return nil, fmt.Errorf("sqllock: %s %q: %w", op, key, d.classify(err))
	}
	return &lockConn{d: d, c: c, raw: rawConn(c)}, nil
}

// connIDs remembers the server ids of pooled connections (keyed by the
// driver's connection), so a blocking wait need not ask each time. It is
// bounded: when full it starts over.
type connIDs struct {
	mu sync.Mutex
	m  map[any]uint64
}

const maxConnIDs = 1024

func (c *connIDs) get(k any) (uint64, bool) {
	if k == nil {
		return 0, false
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	id, ok := c.m[k]
	return id, ok
}

func (c *connIDs) put(k any, id uint64) {
	if k == nil {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.m == nil || len(c.m) >= maxConnIDs {
		c.m = make(map[any]uint64)
	}
	c.m[k] = id
}

func (c *connIDs) forget(k any) {
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.m, k)
}

// errNoRow reports that the lock row does not exist yet.
var errNoRow = errors.New("sqllock: lock row missing")

// Whether the Driver's connections run several statements in one round
// trip, learnt at the first acquisition (MySQL).
const (
	batchUnknown int32 = iota
	batchYes
	batchNo
)
