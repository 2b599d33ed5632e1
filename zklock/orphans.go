package zklock

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/go-zookeeper/zk"
)

// An orphan is a node the driver may have created or failed to delete
// because a reply was lost: a create whose outcome is unknown (name "" until
// found by its guid), an abandoned acquisition, or a release that did not
// complete. Until it is deleted it would hold or block its lock for as long
// as the session lives, so the reaper deletes it once the server answers
// again, unless the next acquisition by the same owner reuses it first.
type orphan struct {
	key, owner string // owner "" when the node may not be reused
	parent     string
	guid       string
	name       string // "" when the create's outcome is unknown
	// session is the session the node was made in, as far as the driver
	// knows: only an attempt in that session reuses the orphan. It does
	// not tell where an unknown create landed: go-zookeeper keeps a
	// request queued while it reconnects, so a create made in one session
	// may be sent, and succeed, in the next one once the first expired.
	session int64
	since   time.Time
}

// reuseWindow is how long an orphan with an owner waits for that owner's
// next attempt (the portable layer retries within a second) before the
// reaper deletes it.
const reuseWindow = 2 * time.Second

// reapRetry is how often the reaper retries an orphan it could not
// delete. Orphans left while the connection has no session are retried as
// soon as it has one again (wake, from stateChanged): this period only
// bounds the retries of calls that failed with a session (a test makes it
// an hour).
var reapRetry = 500 * time.Millisecond

type orphans struct {
	mu   sync.Mutex
	list []orphan
	kick chan struct{}
}

func (o *orphans) init() { o.kick = make(chan struct{}, 1) }

func (o *orphans) add(x orphan) {
	x.since = time.Now()
	o.mu.Lock()
	o.list = append(o.list, x)
	o.mu.Unlock()
	o.wake()
}

// wake makes the reaper look at its orphans now. It never blocks (it runs
// on go-zookeeper's receive goroutine through stateChanged).
func (o *orphans) wake() {
	select {
	case o.kick <- struct{}{}:
	default:
	}
}

// take removes and returns an orphan of key and owner in session, if any.
func (o *orphans) take(key, owner string, session int64) (orphan, bool) {
	o.mu.Lock()
	defer o.mu.Unlock()
	for i, x := range o.list {
		if x.owner != "" && x.owner == owner && x.key == key && x.session == session {
			o.list = append(o.list[:i], o.list[i+1:]...)
			return x, true
		}
	}
	return orphan{}, false
}

// due removes and returns the orphans the reaper should handle now.
func (o *orphans) due(now time.Time) (due []orphan, more bool) {
	o.mu.Lock()
	defer o.mu.Unlock()
	keep := o.list[:0]
	for _, x := range o.list {
		if x.owner != "" && now.Sub(x.since) < reuseWindow {
			keep = append(keep, x)
			continue
		}
		due = append(due, x)
	}
	o.list = keep
	return due, len(keep) > 0
}

// reap is the driver's reaper goroutine.
//
// Its go-zookeeper calls run through do with a ctx that ends at Close: on
// a connection passed to New, Close does not wait for them (see Close).
func (d *Driver) reap() {
	ctx := d.closeCtx
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	for {
		due, more := d.orphans.due(time.Now())
		for _, x := range due {
			if !d.reapOne(ctx, x) {
				x.owner = "" // retry as a plain delete
				d.orphans.mu.Lock()
				d.orphans.list = append(d.orphans.list, x)
				d.orphans.mu.Unlock()
				more = true
			}
		}
		wait := time.Hour
		if more {
			wait = reapRetry
		}
		timer.Reset(wait)
		select {
		case <-d.closing:
			return
		case <-d.orphans.kick:
		case <-timer.C:
		}
	}
}

// reapOne deletes one orphan; false if it must be retried.
func (d *Driver) reapOne(ctx context.Context, x orphan) bool {
	if d.conn.SessionID() == 0 || d.conn.State() != zk.StateHasSession {
		return false // between sessions: cannot tell yet
	}
	// Looked for even when the current session is not x's: a create whose
	// outcome is unknown may have been sent in a later session than the
	// one it was made in (see orphan.session), and its node then lives on
	// in the current one (TestCreateInNextSessionReaped). A node of an
	// expired session is simply not found. The guid is unique to the
	// attempt, so no one else's node is ever deleted.
	name := x.name
	if name == "" {
		var children []string
		var err error
		if derr := d.do(ctx, func() { children, _, err = d.conn.Children(x.parent) }); derr != nil {
			return false
		}
		if errors.Is(err, zk.ErrNoNode) {
			return true
		}
		if err != nil {
			return false
		}
		for _, c := range children {
			if guidOf(c) == x.guid {
				name = c
			}
		}
		if name == "" {
			return true // the create never happened
		}
	}
	var err error
	if derr := d.do(ctx, func() { err = d.conn.Delete(x.parent+"/"+name, -1) }); derr != nil {
		return false
	}
	return err == nil || errors.Is(err, zk.ErrNoNode)
}
