package zklock

import (
	"fmt"
	"sync"
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

// contact follows the connection on behalf of the locks the driver holds:
// when it drops, every held lock is reported in doubt at once
// (backend.Request.OnDoubt), vouched for until the last contact plus two
// thirds of the session timeout; when the session is back, they are told
// (OnRestored) so that the portable layer checks them at once; when the
// server reports the session expired, every held lock is lost (OnLost).
// Locks set no watch of their own: a node deleted behind its holder's
// back is found by the next renewal.
type contact struct {
	mu    sync.Mutex
	held  map[*lockNode]struct{}
	lost  bool // a disconnect was reported and no session came back since
	cause error
	until time.Time
}

func (c *contact) init() { c.held = map[*lockNode]struct{}{} }

// track registers a lock just granted; if contact is lost at the moment,
// the lock is reported in doubt at once.
func (d *Driver) track(n *lockNode) {
	d.contact.mu.Lock()
	d.contact.held[n] = struct{}{}
	lost, cause, until := d.contact.lost, d.contact.cause, d.contact.until
	d.contact.mu.Unlock()
	if lost && n.onDoubt != nil {
		n.onDoubt(cause, until)
	}
}

// untrack forgets a lock released, given up or gone.
func (d *Driver) untrack(n *lockNode) {
	d.contact.mu.Lock()
	delete(d.contact.held, n)
	d.contact.mu.Unlock()
}

// held returns the locks the driver holds. d.contact.mu is held.
func (c *contact) snapshot() []*lockNode {
	out := make([]*lockNode, 0, len(c.held))
	for n := range c.held {
		out = append(out, n)
	}
	return out
}

// stateChanged is called (never concurrently with itself) on every change
// of the connection's state: from go-zookeeper's event callback for a
// connection the driver opened, from pollState for one passed to New.
func (d *Driver) stateChanged(state zk.State) {
	switch state {
	case zk.StateDisconnected, zk.StateConnecting:
		d.lostContact(state, false)
	case zk.StateExpired:
		d.contact.mu.Lock()
		nodes := d.contact.snapshot()
		d.contact.mu.Unlock()
		for _, n := range nodes {
			n.gone(fmt.Errorf("zklock: lock %q: %w: session %#x expired", n.key, backend.ErrLost, n.session))
		}
	case zk.StateHasSession:
		d.contact.mu.Lock()
		if !d.contact.lost {
			d.contact.mu.Unlock()
			return
		}
		d.contact.lost = false
		nodes := d.contact.snapshot()
		d.contact.mu.Unlock()
		for _, n := range nodes {
			if n.onRestored != nil {
				n.onRestored()
			}
		}
	}
}

// lostContact reports every held lock in doubt, unless that was done
// since the last session (or again is set).
func (d *Driver) lostContact(state zk.State, again bool) {
	var until time.Time
	if last := d.sess.lastContact(); !last.IsZero() {
		until = last.Add(d.timeout() * trustedNum / trustedDen)
	}
	d.contact.mu.Lock()
	if d.contact.lost && !again {
		d.contact.mu.Unlock()
		return
	}
	d.contact.lost = true
	d.contact.cause = fmt.Errorf("zklock: %w: connection to ZooKeeper lost (%v); the session lives on until the server expires it", backend.ErrUnavailable, state)
	d.contact.until = until
	nodes, cause := d.contact.snapshot(), d.contact.cause
	d.contact.mu.Unlock()
	for _, n := range nodes {
		if n.onDoubt != nil {
			n.onDoubt(cause, until)
		}
	}
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
