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

// A session of session mode: one connection, the locks held on it, and
// its worker, which runs its statements one at a time.

// session is one shared connection and the locks held on it.
type session struct {
	m    *sessionMode
	c    *sql.Conn
	pid  uint64
	sem  chan struct{} // one statement at a time
	jobs chan *job     // to the worker (loop), sem held
	quit chan struct{} // closed when the Driver closes: the worker ends

	// Guarded by sem.
	ttl       int       // idle_session_timeout, seconds; only grows
	confirmed time.Time // when the last statement the server answered was sent
	gone      error     // the connection failed: every lock on it is lost

	held backend.HeldSet[*sessLock]

	// A waiter session (a connection of Waiters that waited for a key in
	// the server's queue and holds it as its one lease) frees its slot
	// once, when its lease ends or the session does.
	waiter  bool
	slot    sync.Once
	retired sync.Once
	stopc   chan struct{} // closed by retire: the worker ends (nil for a shared session)
}

// stop ends a waiter session's worker.
func (s *session) stop() { close(s.stopc) }

// session returns the live session of slot i, opening it if needed.
func (m *sessionMode) session(ctx context.Context, i int, ttl int) (*session, error) {
	m.mu.Lock()
	s := m.sessions[i]
	m.mu.Unlock()
	if s != nil && !s.idleEnd() {
		return s, nil
	}
	c, err := m.d.conn(ctx)
	if err != nil {
		return nil, err
	}
	ns := &session{m: m, c: c, sem: make(chan struct{}, 1), jobs: make(chan *job), quit: m.quit, ttl: ttl}
	sent := time.Now()
	if ns.pid, err = m.sd.setup(ctx, c, ttl); err != nil {
		_ = c.Raw(func(any) error { return driver.ErrBadConn })
		_ = c.Close()
		return nil, err
	}
	ns.confirmed = sent
	m.d.mu.Lock()
	closed := m.d.closed
	m.d.mu.Unlock()
	m.mu.Lock()
	defer m.mu.Unlock()
	if closed {
		_ = c.Close()
		return nil, backend.ErrClosed
	}
	if cur := m.sessions[i]; cur != nil { // another call opened it meanwhile
		_ = c.Close()
		return cur, nil
	}
	m.sessions[i] = ns
	go ns.loop()
	return ns, nil
}

// errIdleSession ends a shared session that held nothing for half its
// idle timeout (idleEnd).
var errIdleSession = errors.New("the session held nothing for half its idle timeout: closed before the server ends it")

// idleEnd ends s, and reports true, if it holds nothing, has no statement
// out and has been idle for half its idle timeout or more: the server may
// have ended it (idle_session_timeout, wait_timeout), and a statement on it
// would fail ("terminating connection due to idle-session timeout",
// "invalid connection") on a healthy server, as a try after a quiet spell
// did (TestSessionIdleSharedSessionReplaced). A waiter session kept idle
// is closed so too (takeIdle).
func (s *session) idleEnd() bool {
	select {
	case s.sem <- struct{}{}:
	default:
		return false // a statement is out
	}
	defer func() { <-s.sem }()
	if s.gone != nil || s.held.Len() > 0 || time.Since(s.confirmed) < time.Duration(s.ttl)*time.Second/2 {
		return s.gone != nil
	}
	s.m.mu.Lock()
	claimed := false
	for _, l := range s.m.local { // a try claimed a key on s and has not run yet
		if l.s == s {
			claimed = true
			break
		}
	}
	s.m.mu.Unlock()
	if claimed {
		return false
	}
	s.end(errIdleSession)
	return true
}

// end marks s gone (err): its connection is closed, its locks lost.
// sem is held.
func (s *session) end(err error) {
	if s.gone != nil {
		return
	}
	s.gone = err
	_ = s.c.Raw(func(any) error { return driver.ErrBadConn })
	_ = s.c.Close()
	s.m.mu.Lock()
	delete(s.m.held, s)
	for i, cur := range s.m.sessions {
		if cur == s {
			s.m.sessions[i] = nil
		}
	}
	for k, l := range s.m.local {
		if l.s == s {
			delete(s.m.local, k)
		}
	}
	s.m.mu.Unlock()
	s.held.Lost(fmt.Errorf("sqllock: the session holding the lock ended: %w: %w", backend.ErrLost, err))
	if s.waiter {
		s.freeSlot()
	}
}

// freeSlot gives a waiter session's slot of Waiters back, once.
func (s *session) freeSlot() { s.slot.Do(func() { <-s.m.holders }) }

// job is one statement for a session's worker goroutine.
type job struct {
	ctx    context.Context // not the caller's: bounded by the session's idle bound
	cancel context.CancelFunc
	f      func(ctx context.Context, c *sql.Conn) error
	late   func(err error)
	res    chan error // buffered: the caller may have gone

	mu        sync.Mutex
	abandoned bool
}

// loop is s's worker: it runs the session's statements, one at a time,
// on a goroutine that lives as long as the session (a goroutine per
// statement would grow a new stack through the driver's calls every
// time), until the session ends or the Driver closes.
func (s *session) loop() {
	for {
		select {
		case j := <-s.jobs:
			if s.do(j) {
				return
			}
		case <-s.quit:
			return
		case <-s.stopc:
			return
		}
	}
}

// do runs j, records its outcome on s and releases sem; true if the
// session ended.
func (s *session) do(j *job) bool {
	sent := time.Now()
	err := j.f(j.ctx, s.c)
	j.cancel()
	if err == nil || !s.m.d.connGone(err) {
		s.confirmed = sent
	} else {
		s.end(err)
	}
	gone := s.gone != nil
	<-s.sem
	j.mu.Lock()
	a := j.abandoned
	j.mu.Unlock()
	if a && j.late != nil {
		go j.late(err) // it may run a statement on s: not on its worker
	}
	j.res <- err
	return gone
}

// run runs f on s's connection, one statement at a time, on s's worker
// goroutine. f's ctx is not the caller's: a pgx statement whose ctx ends
// closes its connection, which would end the session and every lock on
// it; it ends at the session's idle bound (when the server may have ended
// the session anyway). When ctx ends first, run returns ctx's cause and f
// goes on; late, when not nil, then gets f's error once it is done. A
// connection failure ends the session.
func (s *session) run(ctx context.Context, f func(ctx context.Context, c *sql.Conn) error, late func(err error)) error {
	if err := ctx.Err(); err != nil {
		return context.Cause(ctx)
	}
	select {
	case s.sem <- struct{}{}:
	case <-ctx.Done():
		return fmt.Errorf("an earlier statement on the session is still unanswered: %w", context.Cause(ctx))
	}
	if s.gone != nil {
		err := s.gone
		<-s.sem
		return fmt.Errorf("%w: the session ended: %w", backend.ErrNotHeld, err)
	}
	bound := s.confirmed.Add(time.Duration(s.ttl) * time.Second)
	if time.Until(bound) < time.Second {
		bound = time.Now().Add(time.Second) // a new session's first statements
	}
	sctx, cancel := context.WithDeadline(context.WithoutCancel(ctx), bound)
	j := &job{ctx: sctx, cancel: cancel, f: f, late: late, res: make(chan error, 1)}
	select {
	case s.jobs <- j:
	case <-s.quit:
		cancel()
		<-s.sem
		return fmt.Errorf("%w: the session ended: %w", backend.ErrNotHeld, backend.ErrClosed)
	}
	select {
	case err := <-j.res:
		return err
	case <-ctx.Done():
		j.mu.Lock()
		j.abandoned = true
		j.mu.Unlock()
		select {
		case err := <-j.res:
			return err
		default:
		}
		return fmt.Errorf("%w: %w", errAbandoned, context.Cause(ctx))
	}
}

// errAbandoned: the caller's ctx ended while its statement was in
// flight; the statement goes on until the session's idle bound, and run's
// late callback gets its outcome.
var errAbandoned = errors.New("the server did not answer within the ctx (the statement goes on until the session's idle bound)")

// raise returns the statement that raises s's idle timeout to ttl
// seconds, or "" if it is already as long. sem is held.
func (s *session) raise(ttl int) string {
	if ttl <= s.ttl {
		return ""
	}
	return s.m.sd.raise(ttl)
}
