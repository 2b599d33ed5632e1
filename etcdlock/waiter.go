package etcdlock

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"time"

	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/distlock/distlock/backend"
)

// Waiters watch the near keys just ahead of their own (DefaultNear; the
// tests also use 1). Each release therefore wakes at most near waiters.
const (
	DefaultNear = 2
	maxNear     = 2
)

// A waiter is one queued acquisition: our key ekey with create revision
// rev, waiting for every older key in rng to go.
//
// A waiter watches its own key and the near keys just ahead of it (the
// newest keys older than its own). When those are all the keys ahead (it
// is at most near places from the front), each deletion takes one off,
// and when none is left the waiter holds the lock, with no read between
// the holder's release and the grant. When more keys are ahead, the
// deletion of a watched one makes the waiter read the queue again: with
// near = 2 that read happens when the waiter becomes second in line,
// while the key before it holds the lock, so it is out of the hand-off's
// way.
//
// Watches start at the current revision, not at an older one, which etcd
// would catch up only every 100 ms; the waiter re-reads the queue if
// anything was written before they started, so no deletion is missed (see
// docs/etcd.md, "Why waiting is fast").
type waiter struct {
	d    *Driver
	s    *session
	key  string
	rng  string
	ekey string
	rev  int64
}

// wait returns nil once no key older than ours remains. Transient failures
// (no leader, connection lost) keep our place in line and are retried with
// backoff while our lease lives.
func (w *waiter) wait(ctx context.Context, qv queueView) error {
	delay := 5 * time.Millisecond
	for !qv.first() {
		next, err := w.waitFor(ctx, qv)
		if err == nil {
			qv, delay = next, 5*time.Millisecond
			continue
		}
		if !errors.Is(err, backend.ErrUnavailable) {
			return err
		}
		t := time.NewTimer(delay/2 + rand.N(delay/2+1))
		select {
		case <-t.C:
		case <-w.s.done:
			t.Stop()
			return w.lostErr()
		case <-ctx.Done():
			t.Stop()
			return fmt.Errorf("etcdlock: wait for %q: %w (while the store failed: %w)", w.key, context.Cause(ctx), err)
		}
		delay = min(2*delay, time.Second)
	}
	return nil
}

// A queueView is what a read of the queue showed at revision rev: the near
// keys just ahead of ours (fewer if fewer are left), oldest first, and
// whether they are all the keys ahead.
type queueView struct {
	rev      int64
	ahead    []string
	complete bool
}

// first reports whether no key older than ours was left.
func (qv queueView) first() bool { return qv.complete && len(qv.ahead) == 0 }

// readQueue makes a queueView at rev from a read of the keys older than
// ours, newest first, limited to near.
func readQueue(rev int64, newest *clientv3.GetResponse) queueView {
	qv := queueView{rev: rev, complete: !newest.More}
	for _, kv := range slices.Backward(newest.Kvs) {
		qv.ahead = append(qv.ahead, string(kv.Key))
	}
	return qv
}

// waitFor waits until the queue changes from what qv saw in a way that
// matters, and returns what it looks like then: with no key ahead of ours
// (the lock is ours), or with keys ahead that it does not watch.
//
// When qv's keys are all the keys ahead and the last of them is deleted,
// no key is older than ours: none created later can be. Our own key, the
// other condition of a grant, is watched too. It can still be gone unseen
// only if our lease expired just now, which cannot have happened while the
// lease's last confirmation is less than a TTL old (the grant's validity
// starts there): with less than a third of the TTL left, the waiter reads
// the queue to make sure.
func (w *waiter) waitFor(ctx context.Context, qv queueView) (queueView, error) {
	wctx, cancel := context.WithCancel(clientv3.WithRequireLeader(ctx))
	defer cancel()
	// chans[0] watches our key, the others qv.ahead (at most maxNear).
	var chans [1 + maxNear]clientv3.WatchChan
	keys := append([]string{w.ekey}, qv.ahead...)
	for i, k := range keys {
		chans[i] = w.d.c.Watch(wctx, k, clientv3.WithCreatedNotify(), clientv3.WithFilterPut())
	}
	// next reads the queue again, and tells whether the watches cover it.
	next := func(minRev int64) (queueView, bool, error) {
		cur, err := w.predecessor(ctx, minRev)
		if err != nil || cur.first() {
			return cur, false, err
		}
		for _, k := range cur.ahead {
			if !slices.Contains(keys, k) {
				return cur, false, nil
			}
		}
		return cur, true, nil
	}
	// Every watch sees the deletions after the revision in its creation
	// notice: if none started after qv was read, no deletion was missed;
	// else the queue is read again once all have started.
	start, pending := qv.rev, len(keys)
	qv.ahead = slices.Clone(qv.ahead) // the caller's view stays as it was
	poll := time.NewTimer(recheckEvery)
	defer poll.Stop()
	rechecks := 0
	for {
		wr, err := w.recv(ctx, chans, poll.C)
		if errors.Is(err, errRecheck) {
			cur, ok, err := next(start)
			if !ok {
				return cur, err
			}
			qv = cur
			rechecks++
			poll.Reset(recheckDelay(rechecks))
			continue
		}
		if err != nil {
			return queueView{}, err
		}
		if wr.Created {
			start = max(start, wr.Header.Revision)
			if pending--; pending == 0 && start > qv.rev {
				cur, ok, err := next(start)
				if !ok {
					return cur, err
				}
				qv = cur
			}
			continue
		}
		before := len(qv.ahead)
		for _, ev := range wr.Events {
			if ev.Type != mvccpb.DELETE || ev.Kv.ModRevision <= qv.rev {
				// A deletion qv already reflects: of an earlier key of the
				// same name (names are reused, see takeSlot), seen by a watch
				// on a member whose current revision was behind qv's.
				continue
			}
			// Go by the event's key, not by the watch it came on.
			k := string(ev.Kv.Key)
			if k == w.ekey {
				return queueView{}, fmt.Errorf("etcdlock: wait for %q: %w: our key %s was deleted while waiting", w.key, backend.ErrLost, w.ekey)
			}
			qv.ahead = slices.DeleteFunc(qv.ahead, func(a string) bool { return a == k })
		}
		if len(qv.ahead) == before {
			continue // nothing we wait for was deleted
		}
		switch {
		case !qv.complete:
			// More keys are ahead than we watch: find out which.
			cur, ok, err := next(wr.Header.Revision)
			if !ok {
				return cur, err
			}
			qv = cur
		case !qv.first():
		case time.Until(w.s.validUntil()) > w.s.ttl/3:
			return qv, nil
		default:
			return w.predecessor(ctx, wr.Header.Revision)
		}
	}
}

// A watch created while etcd commits a write may see its events only at
// etcd's next resync, up to 100 ms later (docs/etcd.md): a waiter re-reads
// the queue every recheckEvery for its watches' first 100 ms, then every
// recheckSlow.
const (
	recheckEvery = 25 * time.Millisecond
	maxRechecks  = 4
	recheckSlow  = time.Second
)

// recheckDelay is the delay before the recheck after the n-th.
func recheckDelay(n int) time.Duration {
	if n < maxRechecks {
		return recheckEvery
	}
	return recheckSlow
}

// errRecheck is recv's answer when the recheck timer fired.
var errRecheck = errors.New("etcdlock: recheck")

// recv returns the next response of any of chans (nil ones never answer),
// or why there is none (errRecheck when recheck fires first).
func (w *waiter) recv(ctx context.Context, chans [1 + maxNear]clientv3.WatchChan, recheck <-chan time.Time) (clientv3.WatchResponse, error) {
	var wr clientv3.WatchResponse
	var ok bool
	select {
	case wr, ok = <-chans[0]:
	case wr, ok = <-chans[1]:
	case wr, ok = <-chans[2]:
	case <-recheck:
		return wr, errRecheck
	case <-w.s.done:
		return wr, w.lostErr()
	case <-ctx.Done():
		return wr, fmt.Errorf("etcdlock: wait for %q: %w", w.key, context.Cause(ctx))
	}
	switch {
	case ctx.Err() != nil:
		return wr, fmt.Errorf("etcdlock: wait for %q: %w", w.key, context.Cause(ctx))
	case !ok:
		return wr, w.d.wrap(ctx, "wait for", w.key, errors.New("watch closed"))
	case wr.Err() != nil:
		return wr, w.d.wrap(ctx, "wait for", w.key, wr.Err())
	case wr.Canceled:
		return wr, w.d.wrap(ctx, "wait for", w.key, errors.New("watch canceled"))
	}
	return wr, nil
}

// predecessor checks that our key still exists and reads the near keys
// ahead of it, in one transaction, as of revision minRev or later.
//
// The read is serializable: the member we talk to answers from its own
// copy, without first confirming with the leader that it is up to date
// (which a linearizable read does, at the cost of a trip through the Raft
// loop). That is safe because what the waiter needs to know only changes
// one way: no key older than ours can be created after ours, so once a
// committed revision shows none left, none will ever be. An older copy
// could only show keys that are gone since, delaying the grant; to keep
// that from delaying it at all, a reply older than minRev (a lagging
// member) is read again linearizably.
func (w *waiter) predecessor(ctx context.Context, minRev int64) (queueView, error) {
	resp, err := w.d.c.Txn(ctx).Then(w.readOps(clientv3.WithSerializable())...).Commit()
	if err == nil && resp.Header.Revision < minRev {
		resp, err = w.d.c.Txn(ctx).Then(w.readOps()...).Commit()
	}
	if err != nil {
		return queueView{}, w.d.wrap(ctx, "wait for", w.key, err)
	}
	if own := resp.Responses[0].GetResponseRange().Kvs; len(own) == 0 || own[0].CreateRevision != w.rev {
		return queueView{}, fmt.Errorf("etcdlock: wait for %q: %w: our key %s disappeared while waiting", w.key, backend.ErrLost, w.ekey)
	}
	return readQueue(resp.Header.Revision, (*clientv3.GetResponse)(resp.Responses[1].GetResponseRange())), nil
}

// readOps are the reads of predecessor, with extra options: our key, and
// the near keys just older than ours, newest first.
func (w *waiter) readOps(extra ...clientv3.OpOption) []clientv3.Op {
	return []clientv3.Op{
		clientv3.OpGet(w.ekey, append([]clientv3.OpOption{clientv3.WithKeysOnly()}, extra...)...),
		clientv3.OpGet(w.rng, append([]clientv3.OpOption{clientv3.WithPrefix(), clientv3.WithKeysOnly(),
			clientv3.WithMaxCreateRev(w.rev - 1), clientv3.WithLimit(int64(w.d.near)),
			clientv3.WithSort(clientv3.SortByCreateRevision, clientv3.SortDescend)}, extra...)...),
	}
}

func (w *waiter) lostErr() error {
	return fmt.Errorf("etcdlock: wait for %q: %w: %w", w.key, backend.ErrLost, w.s.cause())
}
