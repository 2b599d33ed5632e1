package zklock

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/distlock/distlock/backend"
)

var _ backend.Batcher = (*Driver)(nil)

// TryAcquireMulti implements backend.Batcher, which zklock declares only
// for RefreshAll (Capabilities.MultiAtomic is false: a multi cannot
// require a lock's queue to be empty).
func (d *Driver) TryAcquireMulti(context.Context, []backend.Request) ([]backend.Grant, error) {
	return nil, fmt.Errorf("zklock: acquire several keys: %w: no multi-lock step", backend.ErrUnsupported)
}

// refreshPipeline bounds the Exists requests a renewal round has in flight
// on the session's connection at once.
const refreshPipeline = 256

// RefreshAll renews a round of leases. On a connection the driver watches
// (Driver.watchRounds), a round costs O(1) requests for the session plus
// one per node that changed:
//
//  1. a Sync (as Refresh's), then one read of one lease's node, an Exists:
//     it proves the session alive at a state at least as new as the
//     leader's when it got the Sync, with the 5/12 rule's validity counted
//     from the round's send time, exactly as a lease's own Sync and Exists
//     would;
//  2. every other lease whose node carries a watch set on this connection
//     is judged by that watch: ZooKeeper sends a watch's event before any
//     reply it sends later on the connection, and go-zookeeper hands it to
//     the watch's channel before the reply to its caller, so a node
//     deleted at a state no newer than the one the read in 1 was answered
//     from has its event in the channel by then (a look at the channel
//     costs no request);
//  3. the nodes whose watch fired, that carry none yet (their first round)
//     or whose watch was set on an earlier connection, are read on their
//     own (a GetW, which sets the watch again), pipelined as before.
//
// A watch set before a reconnect is not trusted: go-zookeeper re-registers
// it (setWatches) on a goroutine of its own, which the round's requests may
// overtake. If the connection changed while the round ran, the round is
// run again with every node read on its own; if it changed again, every
// lease of the round is reported ErrUnavailable (the portable layer tries
// again). If the node read in 1 is gone or not ours, its answer vouches
// for no other lease: every node is read on its own. A lease's first round
// costs what it did before this (one read for it), and a lock released
// before its first round never carries a watch.
//
// On a connection passed to New without Options.WatchRenewals, every node
// is read on its own: one Sync, then every node's Exists at once, pipelined
// on the session's one connection (at most refreshPipeline in flight): n
// renewals cost n+1 requests and about one round trip. One Sync is enough
// either way: ZooKeeper answers a session's requests in order, so every
// read sent after the Sync's answer is answered from a state at least as
// new as the leader's when it got the Sync, which is what Refresh's own
// Sync buys (TestStaleFollowerRefresh runs through this path).
func (d *Driver) RefreshAll(ctx context.Context, locks []backend.Lock, _ []time.Duration) []error {
	errs := make([]error, len(locks))
	var todo []*lockNode
	var at []int
	for i, n := range backend.OwnLocks("zklock", locks, errs, func(n *lockNode) bool { return n.d == d }) {
		if n == nil {
			continue
		}
		if errs[i] = n.refreshable(); errs[i] == nil {
			todo, at = append(todo, n), append(at, i)
		}
	}
	if len(todo) == 0 {
		return errs
	}
	var results []existsResult
	var err error
	if !d.watchRounds {
		results, err = d.readEach(ctx, todo)
	} else {
		gen := d.sess.gen.Load()
		results, err = d.watchRound(ctx, todo, gen, false)
		if err == nil && d.sess.gen.Load() != gen {
			gen = d.sess.gen.Load()
			results, err = d.watchRound(ctx, todo, gen, true)
			if err == nil && d.sess.gen.Load() != gen {
				err = errReconnected
			}
		}
	}
	for j, n := range todo {
		if err != nil {
			errs[at[j]] = failure("refresh", n.key, err)
		} else {
			errs[at[j]] = n.refreshed(results[j])
		}
	}
	return errs
}

// errReconnected reports a renewal round during which the connection
// changed twice: its watches could not be trusted.
var errReconnected = errors.New("the connection to ZooKeeper changed during the renewal round")

// readEach is a round without watches: one Sync, then every node's Exists.
func (d *Driver) readEach(ctx context.Context, todo []*lockNode) ([]existsResult, error) {
	results := make([]existsResult, len(todo))
	var syncErr error
	err := d.do(ctx, func() {
		if _, syncErr = d.conn.Sync(todo[0].path); syncErr != nil {
			return
		}
		d.pipeline(len(todo), func(j int) {
			r := &results[j]
			r.exists, r.stat, r.err = d.conn.Exists(todo[j].path)
		})
	})
	if err == nil {
		err = syncErr
	}
	return results, err
}

// watchRound is a round that trusts the watches set in generation gen (none
// if all): see RefreshAll.
func (d *Driver) watchRound(ctx context.Context, todo []*lockNode, gen uint64, all bool) ([]existsResult, error) {
	results := make([]existsResult, len(todo))
	var syncErr error
	err := d.do(ctx, func() {
		if _, syncErr = d.conn.Sync(todo[0].path); syncErr != nil {
			return
		}
		var read []int                     // nodes read on their own
		watched := make([]bool, len(todo)) // nodes with a watch of this generation
		anchor := -1                       // the node whose Exists confirms the session
		for j, n := range todo {
			switch {
			case all || !n.watchedIn(gen):
				read = append(read, j)
			default:
				watched[j] = true
				if anchor < 0 {
					anchor = j
				}
			}
		}
		if anchor >= 0 {
			r := &results[anchor]
			r.exists, r.stat, r.err = d.conn.Exists(todo[anchor].path)
			if r.err != nil {
				syncErr = r.err
				return
			}
			// Every event sent before that reply is in its channel now.
			// Unless the reply found the node ours, it vouches for no
			// other: every node is read on its own.
			confirmed := r.exists && r.stat.EphemeralOwner == todo[anchor].session
			for j, n := range todo {
				switch {
				case !watched[j] || j == anchor:
				case n.fired() || !confirmed:
					read = append(read, j)
				default:
					results[j] = existsResult{exists: true, watched: true}
				}
			}
			if todo[anchor].fired() && confirmed {
				read = append(read, anchor) // set it again
			}
		}
		d.pipeline(len(read), func(k int) {
			j := read[k]
			results[j] = todo[j].arm(gen)
		})
	})
	if err == nil {
		err = syncErr
	}
	return results, err
}

// pipeline runs f(0..n-1), at most refreshPipeline at once: go-zookeeper
// pipelines concurrent requests on the session's connection.
func (d *Driver) pipeline(n int, f func(int)) {
	sem := make(chan struct{}, refreshPipeline)
	var wg sync.WaitGroup
	for j := range n {
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			f(j)
		})
	}
	wg.Wait()
}

// watchedIn reports whether the node carries a watch set in generation gen.
func (n *lockNode) watchedIn(gen uint64) bool {
	n.wmu.Lock()
	defer n.wmu.Unlock()
	return n.watch != nil && n.wgen == gen
}

// fired reports whether the node's watch fired (or go-zookeeper gave it up:
// session expired, connection closed), and if so forgets it.
func (n *lockNode) fired() bool {
	n.wmu.Lock()
	defer n.wmu.Unlock()
	if n.watch == nil {
		return true
	}
	select {
	case <-n.watch:
		n.watch = nil
		n.d.watchGone()
		n.dropStaleLocked()
		return true
	default:
		return false
	}
}

// dropStaleLocked accounts for the watches the node's current one replaced,
// once it fired or was dropped: go-zookeeper keeps one list of channels per
// path and watch type and fires them all at once, so a replaced watch has
// fired by the time the one that replaced it has (one that has not, as
// when the delete failed, is drained). n.wmu is held.
func (n *lockNode) dropStaleLocked() {
	for _, w := range n.stale {
		select {
		case <-w:
			n.d.watchGone()
		default:
			n.d.drainWatch(w)
		}
	}
	n.stale = nil
}

// arm reads the node with a data watch (GetW: it sets none on a missing
// node), which replaces the watch it had; one that has not fired is kept
// with the node until the new one fires, with which it fires
// (dropStaleLocked).
func (n *lockNode) arm(gen uint64) existsResult {
	n.d.watchSet()
	_, stat, w, err := n.d.conn.GetW(n.path)
	if err != nil || w == nil {
		n.d.watchGone()
		if errors.Is(err, zk.ErrNoNode) {
			return existsResult{}
		}
		return existsResult{err: err}
	}
	n.wmu.Lock()
	if n.released.Load() {
		// Release ran meanwhile, and its dropWatch may be done: this watch
		// fires with (or has fired at) the delete.
		n.wmu.Unlock()
		n.d.drainWatch(w)
		return existsResult{exists: true, stat: stat}
	}
	if n.watch != nil {
		n.stale = append(n.stale, n.watch)
	}
	n.watch, n.wgen = w, gen
	n.wmu.Unlock()
	return existsResult{exists: true, stat: stat}
}

// dropWatch accounts for the node's watch once it is released (Release has
// set n.released before it, so an arm still in flight drains its own): the
// delete fired it (its event came before the delete's reply) unless the
// delete failed, in which case it is drained.
func (n *lockNode) dropWatch() {
	n.wmu.Lock()
	defer n.wmu.Unlock()
	if w := n.watch; w != nil {
		n.watch = nil
		select {
		case <-w:
			n.d.watchGone()
		default:
			n.d.drainWatch(w)
		}
	}
	n.dropStaleLocked()
}
