package zklock

import (
	"fmt"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/distlock/distlock/backend"
)

// trustedFraction is how much of the session timeout after the last
// contact a lock is still vouched for once the connection is lost: the
// server expires the session a full timeout after it last heard from the
// client, and the remaining third covers the round trip between the server
// hearing the client and the client reading the reply (go-zookeeper itself
// gives up on a connection after two thirds without a read).
const trustedNum, trustedDen = 2, 3

// The driver follows the connection on behalf of the locks it holds, kept
// in a backend.HeldSet per session: when the connection drops, every held
// lock is reported in doubt at once (backend.Request.OnDoubt), vouched for
// until the last contact plus two thirds of the session timeout; when the
// session is back, they are told (OnRestored) so that the portable layer
// checks them at once; when the server reports the session expired, every
// held lock is lost (OnLost) and later grants go to a new set. Locks set no
// watch of their own: a node deleted behind its holder's back is found by
// the next renewal.

// heldSet returns the set of the current session's locks.
func (d *Driver) heldSet() *backend.HeldSet[*lockNode] {
	d.heldMu.Lock()
	defer d.heldMu.Unlock()
	return d.held
}

// sessionExpired ends the set of the expired session's locks: each node is
// marked gone (so its Refresh and Release no longer ask the server), and
// each lock is reported lost.
func (d *Driver) sessionExpired() {
	d.heldMu.Lock()
	old := d.held
	d.held = &backend.HeldSet[*lockNode]{}
	d.heldMu.Unlock()
	cause := fmt.Errorf("zklock: %w: session expired", backend.ErrLost)
	for _, n := range old.Locks() {
		n.gone(cause)
	}
	for _, n := range old.Lost(cause) {
		n.gone(cause) // tracked meanwhile
	}
}

// stateChanged is called (never concurrently with itself) on every change
// of the connection's state: from go-zookeeper's event callback for a
// connection the driver opened, from pollState for one passed to New.
func (d *Driver) stateChanged(state zk.State) {
	switch state {
	case zk.StateDisconnected, zk.StateConnecting:
		d.lostContact(state, false)
	case zk.StateExpired:
		d.sessionExpired()
	case zk.StateHasSession:
		d.heldSet().Restored()
	}
}

// lostContact reports every held lock in doubt, unless that was done
// since the last session (or again is set).
func (d *Driver) lostContact(state zk.State, again bool) {
	var until time.Time
	if last := d.sess.lastContact(); !last.IsZero() {
		until = last.Add(d.timeout() * trustedNum / trustedDen)
	}
	held := d.heldSet()
	if held.InDoubt() && !again {
		return
	}
	held.Doubt(fmt.Errorf("zklock: %w: connection to ZooKeeper lost (%v); the session lives on until the server expires it", backend.ErrUnavailable, state), until)
}

// pollState follows the state of a connection passed to New, whose events
// go to its owner: it looks at conn.State() and SessionID() a twentieth of
// the session timeout apart (at least 50 ms); a new session id means the
// old session expired. The last contact is unknown there, so doubt is
// reported without an until: the portable layer keeps the validity its
// last successful renewal gave. A short reconnect between two looks may go
// unseen, so doubt is reported again at every look without a session.
func (d *Driver) pollState() {
	every := max(d.timeout()/20, 50*time.Millisecond)
	t := time.NewTicker(every)
	defer t.Stop()
	last, session := zk.StateHasSession, d.conn.SessionID()
	for {
		select {
		case <-d.closing:
			return
		case <-t.C:
		}
		s := d.conn.State()
		if id := d.conn.SessionID(); id != session && s == zk.StateHasSession {
			session = id
			d.stateChanged(zk.StateExpired)
		}
		if s != zk.StateHasSession {
			d.lostContact(s, true)
			last = zk.StateDisconnected
			continue
		}
		if s != last {
			last = s
			d.stateChanged(s)
		}
	}
}
