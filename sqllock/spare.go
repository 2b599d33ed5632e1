package sqllock

import (
	"context"
	"database/sql/driver"
	"time"
)

// Spare connections. When a lock is released (or an attempt fails cleanly)
// the Driver keeps its connection checked out of the pool for a while, as a
// spare, in the lock session's state: autocommit off, no transaction open,
// the idle timeout (wait_timeout) of its last lock. The next acquisition
// takes the spare and sends only the locking read: no pool checkout, no
// session settings, and the release is a bare COMMIT instead of restoring
// the session's defaults. A spare unused for a while is restored and
// returned to the pool, so the pool only ever holds clean connections.
//
// Spares are kept only while the pool has no limit on open connections (a
// URL-opened Driver's pool has none): with SetMaxOpenConns they could take
// connections that the Driver's other statements (row creation, KILL
// QUERY, fencing epochs) then wait for.
const (
	maxSpares = 8
	// spareIdle bounds how long a spare waits for reuse; it is also kept
	// below half its session's idle timeout, so the server never closes
	// it meanwhile.
	spareIdle = 5 * time.Second
)

// spareRoom reports whether a released connection may be kept.
func (d *Driver) spareRoom() bool {
	d.mu.Lock()
	ok := !d.closed && len(d.spares) < maxSpares
	d.mu.Unlock()
	return ok && !d.noSpares && d.db.Stats().MaxOpenConnections == 0
}

// keep makes lc, with no transaction open, a spare. It returns false if the
// Driver closed or has enough spares meanwhile.
func (d *Driver) keep(lc *lockConn) bool {
	now := time.Now()
	until := now.Add(min(spareIdle, time.Duration(lc.sessTTL)*time.Second/2))
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.closed || len(d.spares) >= maxSpares {
		return false
	}
	lc.spareUntil = until
	d.spares = append(d.spares, lc)
	switch {
	case d.spareTimer == nil:
		d.spareAt = until
		d.spareTimer = time.AfterFunc(until.Sub(now), d.trimSpares)
	case d.spareAt.IsZero() || until.Before(d.spareAt):
		d.spareAt = until
		d.spareTimer.Reset(until.Sub(now))
	}
	return true
}

// spare returns the most recently kept spare still fresh and alive, or nil.
func (d *Driver) spare(ctx context.Context) *lockConn {
	for {
		now := time.Now()
		d.mu.Lock()
		var lc *lockConn
		if n := len(d.spares); n > 0 && now.Before(d.spares[n-1].spareUntil) {
			lc = d.spares[n-1]
			d.spares[n-1] = nil
			d.spares = d.spares[:n-1]
		}
		d.mu.Unlock()
		if lc == nil {
			return nil // expired ones are left to trimSpares
		}
		// The pool's own liveness check (a connection the server closed
		// is detected here, not by the locking read).
		err := lc.c.Raw(func(dc any) error {
			if r, ok := dc.(driver.SessionResetter); ok {
				return r.ResetSession(ctx)
			}
			return nil
		})
		if err == nil {
			return lc
		}
		lc.discard()
	}
}

// trimSpares restores and returns to the pool every spare past its time,
// and schedules itself for the next one.
func (d *Driver) trimSpares() {
	now := time.Now()
	d.mu.Lock()
	if d.closed {
		d.mu.Unlock()
		return
	}
	d.spareWG.Add(1)
	defer d.spareWG.Done()
	var old []*lockConn
	live := d.spares[:0]
	var next time.Time
	for _, lc := range d.spares {
		if now.Before(lc.spareUntil) {
			live = append(live, lc)
			if next.IsZero() || lc.spareUntil.Before(next) {
				next = lc.spareUntil
			}
		} else {
			old = append(old, lc)
		}
	}
	clear(d.spares[len(live):])
	d.spares = live
	d.spareAt = next
	if !next.IsZero() {
		d.spareTimer.Reset(next.Sub(now))
	}
	d.mu.Unlock()
	for _, lc := range old {
		lc.restore()
	}
}

// dropSpares takes every spare (the Driver is closing) and restores each
// to the pool, or closes it if the pool is the Driver's own.
func (d *Driver) dropSpares() {
	d.mu.Lock()
	all := d.spares
	d.spares = nil
	if d.spareTimer != nil {
		d.spareTimer.Stop()
	}
	d.mu.Unlock()
	d.spareWG.Wait()
	for _, lc := range all {
		if d.ownDB {
			lc.discard()
		} else {
			lc.restore()
		}
	}
}

// restore resets a spare and returns it to the pool (see reset), within
// killGrace.
func (lc *lockConn) restore() {
	ctx, cancel := context.WithTimeout(context.Background(), killGrace)
	defer cancel()
	_ = lc.reset(ctx)
}
