package zklock

import (
	"fmt"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/distlock/distlock/backend"
)

// vouchNum/vouchDen is the fraction of the session timeout T for which a
// request the server answered (sent at s) vouches for the session: no
// server expires it before s + 5T/12.
//
// The leader expires a session T after it last touched it, and when the
// client talks to a follower, the leader touches the session only when the
// follower reports the sessions it heard from, in its replies to the
// leader's pings (every tickTime/2); requests the follower forwards (a
// sync) touch nothing there. A follower cut off from the leader right
// after answering a request at s, which goes on serving the client for
// syncLimit ticks, last reported a touch no later than tickTime/2 before
// s, and the client's last request before that may be as old as its ping
// interval, T/3 (go-zookeeper pings every third of T, whatever else it
// sends). So the leader may expire the session at s - T/3 - tickTime/2 +
// T; with tickTime at most T/2 (the server grants at least 2 ticks by
// default: minSessionTimeout), that is s + 5T/12 at the earliest
// (TestFollowerCutAfterRenewal). A lock's validity after a grant or a
// renewal, and after the connection is lost, is counted with it.
const vouchNum, vouchDen = 5, 12

// vouched is how long after a request the server answered the session
// is sure to live (see vouchNum).
func (d *Driver) vouched() time.Duration { return d.timeout() * vouchNum / vouchDen }

// The driver follows the connection on behalf of the locks it holds, kept
// in a backend.HeldSet per session: when the connection drops, every held
// lock is reported in doubt at once (backend.Request.OnDoubt), vouched for
// until the last contact plus 5/12 of the session timeout (vouched); when the
// session is back, they are told (OnRestored) so that the portable layer
// checks them at once; when the server reports the session expired, every
// held lock is lost (OnLost) and later grants go to a new set. A lock sets
// no watch when granted; its first renewal round sets one on its node, and
// a node deleted behind its holder's back is found by the next renewal
// round, through that watch (refreshall.go).

// heldSet returns the set of the current session's locks.
func (d *Driver) heldSet() *backend.HeldSet[*lockNode] {
	d.heldMu.Lock()
	defer d.heldMu.Unlock()
	return d.held
}

// sessionExpired ends the set of the expired session's locks: each node is
// marked gone (so its Refresh and Release no longer ask the server), and
// each lock is reported lost.
//
// A node of the connection's current session is not gone, though it may be
// in that set: on a user's connection the expiry is seen by polling
// (pollState), after the next session began, and a lock granted in it
// meanwhile was tracked in the old set. It is reported lost with the rest
// (the set ends as one), but not marked gone, so its Release, which the
// portable layer makes for a lost lock, deletes it: marked gone, it stayed,
// locking its key for as long as the new session lived.
func (d *Driver) sessionExpired() {
	d.heldMu.Lock()
	old := d.held
	d.held = &backend.HeldSet[*lockNode]{}
	d.heldMu.Unlock()
	cause := fmt.Errorf("zklock: %w: session expired", backend.ErrLost)
	expired := func(n *lockNode) bool {
		cur := d.conn.SessionID()
		return cur == 0 || n.session != cur
	}
	for _, n := range old.Locks() {
		if expired(n) {
			n.gone(cause)
		}
	}
	for _, n := range old.Lost(cause) {
		if expired(n) {
			n.gone(cause) // tracked meanwhile
		}
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
		// The orphans left while there was no session can be deleted
		// now: at once, since each may hold its lock as a ghost
		// (TestGhostReapedWhenSessionBack).
		d.orphans.wake()
	}
}

// lostContact reports every held lock in doubt, unless that was done
// since the last session (or again is set).
func (d *Driver) lostContact(state zk.State, again bool) {
	var until time.Time
	if last := d.sess.lastContact(); !last.IsZero() {
		until = last.Add(d.vouched())
	}
	held := d.heldSet()
	if held.InDoubt() && !again {
		return
	}
	held.Doubt(fmt.Errorf("zklock: %w: connection to ZooKeeper lost (%v); the session lives on until the server expires it", backend.ErrUnavailable, state), until)
}

// pollEvery is how often pollState looks, for a session timeout (a test
// stops it, to play the poller itself).
var pollEvery = func(timeout time.Duration) time.Duration { return max(timeout/20, 50*time.Millisecond) }

// pollState follows the state of a connection passed to New, whose events
// go to its owner: it looks at conn.State() and SessionID() a twentieth of
// the session timeout apart (at least 50 ms); a new session id means the
// old session expired. The last contact is unknown there, so doubt is
// reported without an until: the portable layer keeps the validity its
// last successful renewal gave. A short reconnect between two looks may go
// unseen, so doubt is reported again at every look without a session.
func (d *Driver) pollState(every time.Duration) {
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
			d.sess.gen.Add(1)
			d.stateChanged(zk.StateExpired)
		}
		if s != zk.StateHasSession {
			d.sess.gen.Add(1)
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
