package sqllock

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"fmt"
	"sync"
	"time"

	"github.com/distlock/distlock/backend"
)

// Session mode (Options.Session, URL mode=session): the leases of a
// Driver are session-level advisory locks (pg_try_advisory_lock,
// pg_advisory_unlock) multiplexed on a few shared connections, at most
// Options.Sessions of them, instead of a transaction on a pinned
// connection per lease. A key always goes to the same session (its hash
// picks it). Each session's idle_session_timeout (PostgreSQL 14+) is the
// longest TTL of its leases, so a frozen holder's session, and every
// lock on it, ends within the TTL; the watchdog's renewal round is one
// statement per session (RefreshAll). A crashed holder's sessions close
// and the server frees their locks at once. A blocking wait runs on a
// waiter connection of its own (at most Options.Waiters at once), never
// on a shared session: it waits in the server's queue for the key
// (pg_advisory_lock, GET_LOCK) and keeps it when granted, with the token
// in the same round trip on PostgreSQL: the lease then lives on that
// waiter session (idle timeout = TTL, like a shared one) until released,
// so a contended key passes from holder to waiter in the server's order,
// and the waiter's slot stays taken while it holds. Released, the waiter
// session is kept idle for the next wait. A key that had to wait here in
// the last second skips the try on its shared session.
// Fencing tokens come from the counter tables as in the other modes: a
// durable epoch per key, bumped only when its live counter (UNLOGGED) is
// missing, and the live counter's increment, in the same statement as
// the try-lock.
type sessionMode struct {
	d       *Driver
	sd      sessDialect
	space   string // the key space hashed into each key: the table (PostgreSQL), the database and table (MySQL)
	n       int
	waiters chan struct{}
	holders chan struct{}         // leases kept on waiter connections (at most Waiters)
	idle    []*session            // waiter sessions that hold nothing, kept for the next wait (guarded by mu)
	held    map[*session]struct{} // waiter sessions holding a lease (guarded by mu)
	hot     map[int64]time.Time   // keys whose last acquisition here had to wait, and when (guarded by mu)
	quit    chan struct{}         // closed by close: the sessions' workers end

	mu       sync.Mutex
	sessions []*session          // by hash slot; nil until first used, or after it ended
	local    map[int64]*sessLock // keys held through this Driver
}

// Defaults of Options.Sessions and Options.Waiters.
const (
	defaultSessions = 2
	defaultWaiters  = 2
)

// pgMinSessionVersion is the first server_version_num with
// idle_session_timeout.
const pgMinSessionVersion = 140000

// pgSession is the dialect of session mode: the advisory mode's tables
// (fencing epochs, live counters, the mode record) and its own mode name.
type pgSession struct{ pgAdvisory }

func (pgSession) mode() string { return "session" }

func newSessionMode(ctx context.Context, d *Driver, o Options) (*sessionMode, error) {
	n, w := o.Sessions, o.Waiters
	if n < 0 || w < 0 {
		return nil, fmt.Errorf("sqllock: %w: negative Sessions (%d) or Waiters (%d)", backend.ErrInvalidConfig, n, w)
	}
	if n == 0 {
		n = defaultSessions
	}
	if w == 0 {
		w = defaultWaiters
	}
	m := &sessionMode{d: d, n: n, waiters: make(chan struct{}, w), holders: make(chan struct{}, w), sessions: make([]*session, n), local: map[int64]*sessLock{}, space: d.q.table, quit: make(chan struct{}), held: map[*session]struct{}{}, hot: map[int64]time.Time{}}
	var err error
	if _, ok := d.dia.(pgSession); ok {
		m.sd, err = newPGSession(ctx, d)
	} else {
		m.sd, m.space, err = newMySQLSession(ctx, d)
	}
	if err != nil {
		return nil, err
	}
	return m, nil
}

// sessDialect is what a database does its own way in session mode;
// what they share is written once: the sessions and their statements one
// at a time (sessconn.go), the local claims and tries (sesstry.go), waits
// (sesswait.go), refresh and release (sesslease.go).
type sessDialect interface {
	// setup prepares a new session c with idle timeout ttl seconds and
	// returns its server id.
	setup(ctx context.Context, c *sql.Conn, ttl int) (uint64, error)
	// raise is the statement that sets the session's idle timeout to ttl
	// seconds.
	raise(ttl int) string
	// acquire tries k on session s for key and owner, and when granted
	// returns the fencing token it committed; ok is false when another
	// session holds k. On an error it leaves k unlocked on s.
	acquire(ctx context.Context, s *session, key, owner string, k int64) (tok uint64, ok bool, err error)
	// unlock frees k on c: false if c did not hold it.
	unlock(ctx context.Context, c *sql.Conn, k int64) (bool, error)
	// check renews c's session (after the statement raise, if not "") and
	// returns which of keys it still holds (it may answer for more).
	check(ctx context.Context, c *sql.Conn, raise string, keys []int64) (map[int64]bool, error)
	// await waits on c, a waiter connection, until k is free for a
	// moment, within ctx; when ctx ends it leaves no waiter in the server.
	await(ctx context.Context, m *sessionMode, c *sql.Conn, k int64) error
	// hold makes ws's connection, a waiter connection whose idle timeout
	// is prev seconds (0: a new connection), a session with idle timeout
	// ws.ttl, and sets ws.pid; it waits on it in the server's queue until
	// it holds k, within ctx, and returns the fencing token it committed
	// for key. It calls granted once k is held and before the token's
	// statement is sent, if the token takes a statement of its own. When
	// ctx ends it leaves no waiter in the server; on an error the caller
	// closes the connection, which frees k.
	hold(ctx context.Context, m *sessionMode, ws *session, prev int, key, owner string, k int64, granted func()) (uint64, error)
	// holds reports whether any session holds k, from a pooled connection.
	holds(ctx context.Context, d *Driver, k int64) (bool, error)
}

// slot returns the session index of advisory key k.
func (m *sessionMode) slot(k int64) int { return int(uint64(k) % uint64(m.n)) }

// inspectMutex reports key's holder from pg_locks and the live counter.
func (m *sessionMode) inspectMutex(ctx context.Context, key string) (backend.Info, error) {
	d := m.d
	info := backend.Info{Key: key, Waiters: -1}
	g, err := d.dia.lastGrant(ctx, d, key)
	if err != nil {
		return info, fmt.Errorf("sqllock: inspect %q: %w", key, d.classify(err))
	}
	if !g.exists {
		return info, nil
	}
	info.Token = g.token
	held, err := m.sd.holds(ctx, d, advisoryKey(m.space, key))
	if err != nil {
		return info, fmt.Errorf("sqllock: inspect %q: %w", key, d.classify(err))
	}
	if held {
		info.Held, info.Owner = true, string(g.owner)
	}
	return info, nil
}

// close abandons every session: the server frees their locks.
func (m *sessionMode) close() {
	m.mu.Lock()
	select {
	case <-m.quit:
	default:
		close(m.quit)
	}
	ss := append([]*session(nil), m.sessions...)
	for ws := range m.held {
		ss = append(ss, ws)
	}
	for _, ws := range m.idle {
		_ = ws.c.Raw(func(any) error { return driver.ErrBadConn })
		_ = ws.c.Close()
	}
	m.idle = nil
	m.mu.Unlock()
	for _, s := range ss {
		if s == nil {
			continue
		}
		s.held.End(backend.ErrClosed)
		_ = s.c.Raw(func(any) error { return driver.ErrBadConn })
		_ = s.c.Close()
	}
}

// unlockBehind (tests) unlocks key on the session that holds it, as an
// operator would, behind the lease's back; false if no session of d
// holds it.
func (m *sessionMode) unlockBehind(ctx context.Context, key string) (bool, error) {
	k := advisoryKey(m.space, key)
	m.mu.Lock()
	l := m.local[k]
	m.mu.Unlock()
	if l == nil {
		return false, nil
	}
	var freed bool
	err := l.s.run(ctx, func(ctx context.Context, c *sql.Conn) error {
		var err error
		freed, err = m.sd.unlock(ctx, c, k)
		return err
	}, nil)
	return freed, err
}
