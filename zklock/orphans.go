package zklock

import (
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
	session    int64  // the session that may hold it
	since      time.Time
}

// reuseWindow is how long an orphan with an owner waits for that owner's
// next attempt (the portable layer retries within a second) before the
// reaper deletes it.
const reuseWindow = 2 * time.Second

// reapRetry is how often the reaper retries while the server is unreachable.
const reapRetry = 500 * time.Millisecond

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
func (d *Driver) reap() {
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	for {
		due, more := d.orphans.due(time.Now())
		for _, x := range due {
			if !d.reapOne(x) {
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
func (d *Driver) reapOne(x orphan) bool {
	cur := d.conn.SessionID()
	if cur == 0 || d.conn.State() != zk.StateHasSession {
		return false // between sessions: cannot tell yet
	}
	if x.session != 0 && cur != x.session {
		return true // its session ended: the ephemeral node is gone
	}
	name := x.name
	if name == "" {
		children, _, err := d.conn.Children(x.parent)
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
	err := d.conn.Delete(x.parent+"/"+name, -1)
	return err == nil || errors.Is(err, zk.ErrNoNode)
}
