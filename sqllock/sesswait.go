package sqllock

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"
	"time"

	"github.com/distlock/distlock/backend"
)

// A blocking wait in session mode: on a waiter connection of its own, in
// the server's queue for the key, which the connection keeps as the lease
// (a waiter session) when granted.

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
	if err := m.checkTTL(req.Key, ttl); err != nil {
		return backend.Grant{}, err
	}
	secs := seconds(ttl)
	select {
	case m.waiters <- struct{}{}:
	case <-ctx.Done():
		<-m.holders
		return backend.Grant{}, fmt.Errorf("sqllock: wait %q: %w (all %d waiter connections in use, Options.Waiters)", req.Key, context.Cause(ctx), cap(m.waiters))
	}
	c, prev, pid := m.takeIdle()
	if c == nil {
		var err error
		if c, err = m.d.conn(ctx); err != nil {
			return m.waitFailed(ctx, req.Key, c, err)
		}
	}
	ws := &session{m: m, c: c, sem: make(chan struct{}, 1), jobs: make(chan *job), quit: m.quit, stopc: make(chan struct{}), ttl: secs, pid: pid, waiter: true}
	// Claim k in this Driver when the server grants it to ws: it grants
	// k to no other session, so a claim of k here meanwhile is a try that
	// will be refused.
	l := &sessLock{s: ws, key: req.Key, k: k}
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
		m.unclaim(l)
		return m.waitFailed(ctx, req.Key, c, err)
	}
	if sent, err = m.leaseStart(ctx, c, k, sent, secs); err != nil {
		m.unclaim(l)
		return m.waitFailed(ctx, req.Key, c, err)
	}
	ws.confirmed = sent
	if !m.keepWaiter(ws, k) {
		m.unclaim(l)
		return m.waitFailed(ctx, req.Key, c, backend.ErrClosed)
	}
	go ws.loop()
	if err := ws.held.Track(l, req.Hooks()); err != nil {
		m.unclaim(l)
		ws.retire(false)
		return backend.Grant{}, fmt.Errorf("sqllock: acquire %q: %w: %w", req.Key, backend.ErrUnavailable, err)
	}
	return backend.Grant{Lock: l, Token: tok, ValidFrom: sent}, nil
}

// takeIdle takes the connection of an idle waiter session for a wait,
// with its idle bound prev in seconds and its server id; c is nil if no
// idle session is kept (a new connection's prev is 0).
func (m *sessionMode) takeIdle() (c *sql.Conn, prev int, pid uint64) {
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
	return c, prev, pid
}

// waitFailed ends a wait of waitHold that got no lease: it closes c, if
// any (which frees k), gives back the wait's slots of Waiters and returns
// the wait's error for key (ctx's cause once ctx ended).
func (m *sessionMode) waitFailed(ctx context.Context, key string, c *sql.Conn, err error) (backend.Grant, error) {
	if c != nil {
		_ = c.Raw(func(any) error { return driver.ErrBadConn })
		_ = c.Close()
	}
	<-m.waiters
	<-m.holders
	if ctx.Err() != nil {
		return backend.Grant{}, fmt.Errorf("sqllock: wait %q: %w", key, context.Cause(ctx))
	}
	return backend.Grant{}, fmt.Errorf("sqllock: wait %q: %w", key, m.d.classify(err))
}

// leaseStart returns when the lease that waiter connection c was granted
// for k starts: sent, when the wait was sent, unless the reply came more
// than a quarter of the TTL (secs seconds) later.
func (m *sessionMode) leaseStart(ctx context.Context, c *sql.Conn, k int64, sent time.Time, secs int) (time.Time, error) {
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
			return sent, err
		}
	}
	return sent, nil
}

// keepWaiter records waiter session ws as holding its lease of k, false
// if the Driver closed meanwhile: the wait's slot of Waiters is given
// back, and k is marked hot.
func (m *sessionMode) keepWaiter(ws *session, k int64) bool {
	m.mu.Lock()
	select {
	case <-m.quit: // the Driver closed meanwhile
		m.mu.Unlock()
		return false
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
	return true
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
