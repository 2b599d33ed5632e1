package sqllock

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
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
// session.go holds what they share (the sessions, their statements one at
// a time, the local claims, waits, refresh and release).
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

// tryMutex takes key on its session if no lease of this Driver holds it
// and the server grants it.
func (m *sessionMode) tryMutex(ctx context.Context, req backend.Request) (backend.Grant, error) {
	ttl := req.TTL
	if ttl > m.d.dia.maxTTL() {
		return backend.Grant{}, fmt.Errorf("sqllock: acquire %q: %w: TTL %v is beyond the server's longest idle timeout (%v)", req.Key, backend.ErrInvalidConfig, ttl, m.d.dia.maxTTL())
	}
	k := advisoryKey(m.space, req.Key)
	m.d.mu.Lock()
	closed := m.d.closed
	m.d.mu.Unlock()
	m.mu.Lock()
	busy := m.local[k] != nil
	m.mu.Unlock()
	if closed {
		return backend.Grant{}, fmt.Errorf("sqllock: acquire %q: %w", req.Key, backend.ErrClosed)
	}
	if busy {
		return backend.Grant{}, backend.NotAcquired(req.Key, 0)
	}
	secs := seconds(ttl)
	s, err := m.session(ctx, m.slot(k), secs)
	if err != nil {
		return backend.Grant{}, fmt.Errorf("sqllock: acquire %q: %w", req.Key, m.d.classify(err))
	}
	l := &sessLock{s: s, key: req.Key, k: k}
	// Claim the key in this Driver first: the server's lock is the
	// session's, and a session's advisory locks stack.
	m.mu.Lock()
	if m.local[k] != nil {
		m.mu.Unlock()
		return backend.Grant{}, backend.NotAcquired(req.Key, 0)
	}
	m.local[k] = l
	m.mu.Unlock()
	unclaim := func() {
		m.mu.Lock()
		if m.local[k] == l {
			delete(m.local, k)
		}
		m.mu.Unlock()
	}
	sent := time.Now()
	var tok uint64
	var ok bool
	err = s.run(ctx, func(ctx context.Context, c *sql.Conn) error {
		if q := s.raise(secs); q != "" {
			if _, err := c.ExecContext(ctx, q); err != nil {
				return err
			}
			s.ttl = secs
		}
		var err error
		tok, ok, err = m.sd.acquire(ctx, s, req.Key, req.Owner, k)
		return err
	}, func(err error) {
		// The caller gave up: undo a grant that came late.
		if err == nil && ok {
			_ = s.run(context.Background(), func(ctx context.Context, c *sql.Conn) error {
				_, err := m.sd.unlock(ctx, c, k)
				return err
			}, nil)
		}
		unclaim()
	})
	if err != nil {
		if !errors.Is(err, errAbandoned) {
			unclaim()
		}
		if errors.Is(err, backend.ErrNotHeld) { // the session ended before the statement
			return backend.Grant{}, fmt.Errorf("sqllock: acquire %q: %w: %w", req.Key, backend.ErrUnavailable, err)
		}
		return backend.Grant{}, fmt.Errorf("sqllock: acquire %q: %w", req.Key, m.d.classify(err))
	}
	if !ok {
		unclaim()
		return backend.Grant{}, backend.NotAcquired(req.Key, 0)
	}
	if tok == 0 {
		_ = l.Release(context.WithoutCancel(ctx))
		return backend.Grant{}, fmt.Errorf("sqllock: acquire %q: fencing counter returned %d", req.Key, tok)
	}
	if err := s.held.Track(l, req.Hooks()); err != nil {
		unclaim()
		return backend.Grant{}, fmt.Errorf("sqllock: acquire %q: %w: %w", req.Key, backend.ErrUnavailable, err)
	}
	return backend.Grant{Lock: l, Token: tok, ValidFrom: sent}, nil
}

// waitMutex waits for key on a waiter connection of its own (at most
// Waiters at once) in the server's queue, until ctx ends: the connection
// that the server grants the key to keeps it as the lease (a waiter
// session), so that a contended key passes from holder to waiter in the
// server's order, with one statement for the token after the grant.
func (m *sessionMode) waitMutex(ctx context.Context, req backend.Request) (backend.Grant, error) {
	k := advisoryKey(m.space, req.Key)
	m.mu.Lock()
	hot := time.Since(m.hot[k]) < hotFor
	m.mu.Unlock()
	for {
		if !hot {
			// Not contended of late: a try on the shared session first
			// (one statement, no waiter connection).
			g, err := m.tryMutex(ctx, req)
			if !errors.Is(err, backend.ErrNotAcquired) {
				return g, err
			}
		}
		hot = false
		m.mu.Lock()
		own := m.local[k] != nil
		m.mu.Unlock()
		if !own {
			select {
			case m.holders <- struct{}{}: // the lease may stay on the waiter connection
				return m.waitHold(ctx, req, k)
			default:
			}
		}
		// Every lease Waiters may keep on waiter connections is held:
		// wait for the key to be free, and race for it on the session.
		if err := m.awaitFree(ctx, req.Key, k); err != nil {
			return backend.Grant{}, err
		}
	}
}

// A key whose acquisition here had to wait less than hotFor ago is
// contended: a wait for it goes to the server's queue at once, without a
// try on the shared session first (one statement fewer, and no barging
// past the queue). At most maxHot keys are remembered.
const (
	hotFor = time.Second
	maxHot = 4096
)

// afterGrantHook, when set (tests), runs when a waiter's grant reply has
// been read, before the lease's validity is settled: a process paused
// there.
var afterGrantHook func()

// waitHold takes a slot of Waiters and a waiter session (an idle one, or
// a new connection), waits on it for k in the server's queue, and keeps
// k on it as the lease.
func (m *sessionMode) waitHold(ctx context.Context, req backend.Request, k int64) (backend.Grant, error) {
	ttl := req.TTL
	if ttl > m.d.dia.maxTTL() {
		return backend.Grant{}, fmt.Errorf("sqllock: acquire %q: %w: TTL %v is beyond the server's longest idle timeout (%v)", req.Key, backend.ErrInvalidConfig, ttl, m.d.dia.maxTTL())
	}
	secs := seconds(ttl)
	select {
	case m.waiters <- struct{}{}:
	case <-ctx.Done():
		<-m.holders
		return backend.Grant{}, fmt.Errorf("sqllock: wait %q: %w (all %d waiter connections in use, Options.Waiters)", req.Key, context.Cause(ctx), cap(m.waiters))
	}
	var c *sql.Conn
	prev := 0 // c's idle bound, seconds: 0 for a new connection
	var pid uint64
	m.mu.Lock()
	for len(m.idle) > 0 && c == nil {
		ws := m.idle[len(m.idle)-1]
		m.idle = m.idle[:len(m.idle)-1]
		if time.Since(ws.confirmed) < time.Duration(ws.ttl)*time.Second/2 {
			c, prev, pid = ws.c, ws.ttl, ws.pid // its worker has ended (retire)
		} else { // the server may end it for idleness soon
			_ = ws.c.Raw(func(any) error { return driver.ErrBadConn })
			_ = ws.c.Close()
		}
	}
	m.mu.Unlock()
	fail := func(err error) (backend.Grant, error) {
		if c != nil {
			_ = c.Raw(func(any) error { return driver.ErrBadConn })
			_ = c.Close()
		}
		<-m.waiters
		<-m.holders
		if ctx.Err() != nil {
			return backend.Grant{}, fmt.Errorf("sqllock: wait %q: %w", req.Key, context.Cause(ctx))
		}
		return backend.Grant{}, fmt.Errorf("sqllock: wait %q: %w", req.Key, m.d.classify(err))
	}
	if c == nil {
		var err error
		if c, err = m.d.conn(ctx); err != nil {
			return fail(err)
		}
	}
	ws := &session{m: m, c: c, sem: make(chan struct{}, 1), jobs: make(chan *job), quit: m.quit, stopc: make(chan struct{}), ttl: secs, pid: pid, waiter: true}
	// Claim k in this Driver when the server grants it to ws: it grants
	// k to no other session, so a claim of k here meanwhile is a try that
	// will be refused.
	l := &sessLock{s: ws, key: req.Key, k: k}
	unclaim := func() {
		m.mu.Lock()
		if m.local[k] == l {
			delete(m.local, k)
		}
		m.mu.Unlock()
	}
	// On the caller's goroutine and ctx: c is no one else's, and closing
	// it (what a statement whose ctx ends does) frees k.
	sent := time.Now()
	tok, err := m.sd.hold(ctx, m, ws, prev, req.Key, req.Owner, k, func() {
		m.mu.Lock()
		m.local[k] = l
		m.mu.Unlock()
		if afterGrantHook != nil {
			afterGrantHook()
		}
	})
	if err == nil && tok == 0 {
		err = fmt.Errorf("sqllock: fencing counter returned %d", tok)
	}
	if err != nil {
		unclaim()
		return fail(err)
	}
	if time.Since(sent) > time.Duration(secs)*time.Second/4 {
		// A long wait, or a reply read long after it was sent (this
		// process paused): the server's idle timer for the session ran
		// from the grant, which may be anywhere since sent, so the lease's
		// time starts at a statement sent now, which must find k still
		// held by the session (the server may have ended it meanwhile).
		// Counting from when the reply was read instead let a process
		// stopped for longer than the TTL after the grant hold a lock the
		// server had freed (faults: postgres-session, seed 108207017).
		sent = time.Now()
		if _, err := m.sd.check(ctx, c, "", []int64{k}); err != nil {
			unclaim()
			return fail(err)
		}
	}
	ws.confirmed = sent
	m.mu.Lock()
	select {
	case <-m.quit: // the Driver closed meanwhile
		m.mu.Unlock()
		unclaim()
		return fail(backend.ErrClosed)
	default:
	}
	m.held[ws] = struct{}{}
	<-m.waiters // no longer waiting: its slot of holders stays taken while it holds
	if len(m.hot) >= maxHot {
		for hk, at := range m.hot {
			if time.Since(at) >= hotFor {
				delete(m.hot, hk)
			}
		}
	}
	if len(m.hot) < maxHot {
		m.hot[k] = time.Now()
	}
	m.mu.Unlock()
	go ws.loop()
	if err := ws.held.Track(l, req.Hooks()); err != nil {
		unclaim()
		ws.retire(false)
		return backend.Grant{}, fmt.Errorf("sqllock: acquire %q: %w: %w", req.Key, backend.ErrUnavailable, err)
	}
	return backend.Grant{Lock: l, Token: tok, ValidFrom: sent}, nil
}

// retire ends waiter session ws once its lease has ended: kept idle for
// the next wait if park and it holds nothing, else closed; its slot of
// Waiters is free again.
func (ws *session) retire(park bool) { ws.retired.Do(func() { ws.retire1(park) }) }

func (ws *session) retire1(park bool) {
	m := ws.m
	// Stop the worker: with sem held no statement is in flight.
	ws.sem <- struct{}{}
	gone := ws.gone
	m.mu.Lock()
	delete(m.held, ws)
	select {
	case <-m.quit:
		park = false
	default:
	}
	if park && gone == nil && len(m.idle) < cap(m.waiters) {
		ws.gone = errRetired
		m.idle = append(m.idle, ws)
		m.mu.Unlock()
	} else {
		m.mu.Unlock()
		if gone == nil {
			ws.gone = errRetired
			_ = ws.c.Raw(func(any) error { return driver.ErrBadConn })
			_ = ws.c.Close()
		}
	}
	ws.stop()
	<-ws.sem
	ws.freeSlot()
}

// errRetired: a waiter session whose lease ended takes no statement.
var errRetired = errors.New("the waiter session's lease ended")

// awaitFree returns once advisory key k was free for a moment (or held
// by this Driver, which then waits locally), or when ctx ends.
func (m *sessionMode) awaitFree(ctx context.Context, key string, k int64) error {
	m.mu.Lock()
	own := m.local[k]
	m.mu.Unlock()
	if own != nil {
		// Held by a lease of this Driver: the server's queue would see
		// our own session's lock. Wait for its end here.
		t := time.NewTimer(5 * time.Millisecond)
		defer t.Stop()
		select {
		case <-t.C:
			return nil
		case <-ctx.Done():
			return fmt.Errorf("sqllock: wait %q: %w", key, context.Cause(ctx))
		}
	}
	select {
	case m.waiters <- struct{}{}:
	case <-ctx.Done():
		return fmt.Errorf("sqllock: wait %q: %w (all %d waiter connections in use, Options.Waiters)", key, context.Cause(ctx), cap(m.waiters))
	}
	defer func() { <-m.waiters }()
	c, err := m.d.conn(ctx)
	if err != nil {
		return fmt.Errorf("sqllock: wait %q: %w", key, m.d.classify(err))
	}
	err = m.sd.await(ctx, m, c, k)
	if err != nil {
		_ = c.Raw(func(any) error { return driver.ErrBadConn })
		_ = c.Close()
		if ctx.Err() != nil {
			return fmt.Errorf("sqllock: wait %q: %w", key, context.Cause(ctx))
		}
		return fmt.Errorf("sqllock: wait %q: %w", key, m.d.classify(err))
	}
	_ = c.Close()
	return nil
}

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
