package etcdlock

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/distlock/distlock/backend"
	"github.com/distlock/distlock/internal/backoff"
)

// A waiter follows the near keys just ahead of its own (DefaultNear; the
// tests also use 1): the deletion of any other key ahead makes it do
// nothing.
const (
	DefaultNear = 2
	maxNear     = 2
)

// A waiter is one queued acquisition: our key ekey with create revision
// rev, waiting for every older key in rng to go.
//
// A waiter follows its own key and the near keys just ahead of it (the
// newest keys older than its own) through the driver's watches of those
// keys (lockwatch.go), so a release is sent to the holder and the near
// waiters behind it only. When those are all the keys ahead (it is at
// most near places from the front), each deletion takes one off, and when
// none is left the waiter holds the lock, with no read between the
// holder's release and the grant. When more keys are ahead, the deletion
// of a followed one makes the waiter read the queue again: with near = 2
// that read happens when the waiter becomes second in line, while the key
// before it holds the lock, so it is out of the hand-off's way.
//
// A key's watch starts at the current revision, not at an older one,
// which etcd would catch up only every 100 ms, and stays open across
// waits (names are reused, so a steady queue follows the same names cycle
// after cycle); a waiter re-reads the queue if anything was written between its
// read and the watch's start, so no deletion is missed (see docs/etcd.md,
// "Why waiting is fast").
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
	return waitInLine(ctx, qv, queueView.first, w.waitFor, w.pause)
}

// waitInLine steps a waiter's view v forward (step waits for the next
// change ahead of it) until holds says it holds. A step failing with
// ErrUnavailable keeps the waiter's place in line: pause waits with
// backoff (5 ms doubling to 1 s, jittered) and decides whether to go on;
// any other error ends the wait.
func waitInLine[V any](ctx context.Context, v V, holds func(V) bool,
	step func(context.Context, V) (V, error), pause func(context.Context, time.Duration, error) error) error {
	var bo backoff.Backoff
	for !holds(v) {
		next, err := step(ctx, v)
		if err == nil {
			v = next
			bo.Reset()
			continue
		}
		if !errors.Is(err, backend.ErrUnavailable) {
			return err
		}
		if err := pause(ctx, bo.Next(5*time.Millisecond, time.Second), err); err != nil {
			return err
		}
	}
	return nil
}

// pause waits delay before a wait that failed with err (transient) tries
// again; it returns nil then, or the error that ends the wait.
func (w *waiter) pause(ctx context.Context, delay time.Duration, err error) error {
	t := time.NewTimer(delay)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-w.s.done:
		return w.lostErr()
	case <-ctx.Done():
		return fmt.Errorf("etcdlock: wait for %q: %w (while the store failed: %w)", w.key, context.Cause(ctx), err)
	}
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

// waitFor waits until no key is ahead of ours, or until a read of the
// queue shows other keys ahead than qv, and returns the view that shows
// it; the caller calls it again with that view.
//
// It follows the deletions of our own key and of qv's keys through the
// driver's shared watches of those keys (lockwatch.go). When qv's keys are
// all the keys ahead and the last of them is deleted, no key is older than
// ours: none created later can be. Our own key, the other condition of a
// grant, is followed too. It can still be gone unseen only if our lease
// expired just now, which cannot have happened while the lease's last
// confirmation is less than a TTL old (the grant's validity starts there):
// with less than a third of the TTL left, the waiter reads the queue to
// make sure. When more keys are ahead than qv holds, the deletion of one
// of qv's keys makes the waiter read the queue again: with near = 2 that
// read happens when the waiter becomes second in line, while the key
// before it holds the lock, so it is out of the hand-off's way.
func (w *waiter) waitFor(ctx context.Context, qv queueView) (queueView, error) {
	ready := make(chan struct{}, 1)
	subs, err := w.d.subscribeAll(ctx, "wait for", w.key, append([]string{w.ekey}, qv.ahead...), qv.rev, ready, func(k string) bool { return k == w.ekey })
	defer closeSubs(subs)
	if err != nil {
		return queueView{}, err
	}
	from, err := w.started(ctx, subs, "wait for") // the oldest revision after which every watch reports all
	if err != nil {
		return queueView{}, err
	}
	qv.ahead = slices.Clone(qv.ahead) // the caller's view stays as it was
	// The watches report every deletion after from: if that is after qv
	// was read, deletions in between may be missing, and the queue is read
	// again.
	if from > qv.rev {
		trace(w.d, "created-reread", w.rev)
		return w.predecessor(ctx, from)
	}
	poll := time.NewTimer(recheckDelay(youngest(subs)))
	defer poll.Stop()
	for {
		if signalled, err := w.await(ctx, "wait for", ready, poll); err != nil {
			return queueView{}, err
		} else if !signalled {
			// A watch's events may come late while etcd has not synced it
			// (its first 100 ms) or has set it aside: read the queue.
			trace(w.d, "recheck", w.rev)
			cur, err := w.predecessor(ctx, qv.rev)
			if err != nil || !slices.Equal(cur.ahead, qv.ahead) || cur.complete != qv.complete {
				return cur, err
			}
			qv = cur
			poll.Reset(recheckDelay(youngest(subs)))
			continue
		}
		before := len(qv.ahead)
		var last int64
		if qv, last, err = w.dropDeleted(ctx, subs, qv); err != nil {
			return queueView{}, err
		}
		if len(qv.ahead) == before {
			continue // nothing we wait for was deleted
		}
		switch {
		case !qv.complete:
			// More keys are ahead than qv held: find out which.
			return w.predecessor(ctx, last)
		case !qv.first():
		case time.Until(w.s.validUntil()) > w.s.ttl/3:
			trace(w.d, "grant-event", w.rev)
			return qv, nil
		default:
			return w.predecessor(ctx, last)
		}
	}
}

// await waits for a subscription's signal on ready (signalled) or the
// poll timer (not signalled: the caller reads the queue), unless the wait
// ends first: the session lost, or ctx done (op names the wait).
func (w *waiter) await(ctx context.Context, op string, ready <-chan struct{}, poll *time.Timer) (signalled bool, err error) {
	select {
	case <-ready:
		return true, nil
	case <-poll.C:
		return false, nil
	case <-w.s.done:
		return false, w.lostErr()
	case <-ctx.Done():
		return false, fmt.Errorf("etcdlock: %s %q: %w", op, w.key, context.Cause(ctx))
	}
}

// started waits until every watch of subs has started and returns the
// newest revision after which one of them surely reports every deletion;
// op names the wait in its errors.
func (w *waiter) started(ctx context.Context, subs []*lockSub, op string) (int64, error) {
	var covered int64
	for _, sub := range subs {
		select {
		case <-sub.w.started:
		case <-sub.w.done:
			return 0, w.watchEnded(ctx, sub.w)
		case <-w.s.done:
			return 0, w.lostErr()
		case <-ctx.Done():
			return 0, fmt.Errorf("etcdlock: %s %q: %w", op, w.key, context.Cause(ctx))
		}
		covered = max(covered, sub.covers())
	}
	return covered, nil
}

// dropDeleted takes the deletions subs' watches reported off qv.ahead
// and returns qv with the newest of their revisions (0 if none was new);
// an error if our key was deleted or a watch ended.
func (w *waiter) dropDeleted(ctx context.Context, subs []*lockSub, qv queueView) (queueView, int64, error) {
	var last int64
	for _, sub := range subs {
		for _, ev := range sub.take() {
			if ev.rev <= qv.rev {
				// A deletion qv already reflects; or of an earlier key
				// of the same name (names are reused, see takeSlot).
				continue
			}
			if ev.key == w.ekey {
				return queueView{}, 0, fmt.Errorf("etcdlock: wait for %q: %w: our key %s was deleted while waiting", w.key, backend.ErrLost, w.ekey)
			}
			if slices.Contains(qv.ahead, ev.key) {
				trace(w.d, "wdel", ev.rev)
			}
			qv.ahead = slices.DeleteFunc(qv.ahead, func(a string) bool { return a == ev.key })
			last = max(last, ev.rev)
		}
	}
	for _, sub := range subs {
		if sub.ended() {
			return queueView{}, 0, w.watchEnded(ctx, sub.w)
		}
	}
	return qv, last, nil
}

// youngest is the age of the youngest of subs' watches.
func youngest(subs []*lockSub) time.Duration {
	age := time.Duration(math.MaxInt64)
	for _, sub := range subs {
		age = min(age, sub.age())
	}
	return age
}

// watchEnded is the error of a wait whose lock watch ended.
func (w *waiter) watchEnded(ctx context.Context, lw *lockWatch) error {
	lw.mu.Lock()
	err := lw.err
	lw.mu.Unlock()
	if err == nil {
		err = errors.New("watch ended")
	}
	return w.d.wrap(ctx, "wait for", w.key, err)
}

// A watch created while etcd applies a write may see its events only at
// etcd's next resync, up to 100 ms later (docs/etcd.md): a waiter re-reads
// the queue every recheckEvery while the youngest of its watches is younger
// than recheckYoung, then every recheckSlow.
const (
	recheckEvery = 25 * time.Millisecond
	recheckYoung = 125 * time.Millisecond
	recheckSlow  = time.Second
)

// recheckDelay is the delay before the next recheck of a wait whose
// youngest watch is age old.
func recheckDelay(age time.Duration) time.Duration {
	if age < recheckYoung {
		return recheckEvery
	}
	return recheckSlow
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
	trace(w.d, "read-sent", minRev)
	resp, err := w.d.c.Txn(ctx).Then(w.readOps(clientv3.WithSerializable())...).Commit()
	if err == nil {
		trace(w.d, "read-done", resp.Header.Revision)
	}
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

// traceHook, when set (tests), is told the steps of a hand-off.
var traceHook func(d *Driver, step string, rev int64)

func trace(d *Driver, step string, rev int64) {
	if traceHook != nil {
		traceHook(d, step, rev)
	}
}
