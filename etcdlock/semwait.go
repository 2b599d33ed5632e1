package etcdlock

import (
	"context"
	"fmt"
	"slices"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/distlock/distlock/backend"
)

// Waiting for permits. A waiter knows the keys ahead of its own, with
// their permits and limits, from the read that queued it, and keys ahead
// only ever leave (no key older than ours can be created later). So it
// follows their deletions through the driver's shared watch of each key
// (lockwatch.go), as the mutex's waiters do, and applies them to that
// view: when the view says it holds, it holds, with no read between the
// release that admitted it and its grant. A release that admits no one
// costs the waiters behind it a watch event each, and no request.
// Deletions not seen yet can only delay a grant, never make a wrong one:
// a key that holds keeps holding as keys ahead of it leave.
//
// A waiter far back in a long queue follows only the newest keys ahead of
// its own: maxSemFollow of them, and more while their permits plus its own
// still fit its limit. While those are all there it cannot hold, whatever
// the older keys do; once so many of them left that they no longer keep it
// out, it reads the queue again.
//
// A key's watch starts at the current revision, not at an older one, which
// etcd would catch up only every 100 ms (docs/etcd.md, "Why waiting is
// fast"): a waiter whose watches started after its read reads again, and
// while its watches are young it re-reads every recheckEvery.

// maxSemFollow is how many keys ahead of its own a waiter for permits
// follows at least, if there are as many.
const maxSemFollow = 32

// A semWaiter is one queued acquisition of permits: the mutex's waiter's
// fields, with our key's range the semaphore's.
type semWaiter struct{ waiter }

// wait returns nil once our key holds. Transient failures keep our place
// in line and are retried with backoff while our lease lives.
func (w *semWaiter) wait(ctx context.Context, q semQueue) error {
	return waitInLine(ctx, q, func(q semQueue) bool { return q.holds }, w.waitFor, w.pause)
}

// followFrom is the index in q.ahead of the oldest key a waiter with view
// q follows (0: every key ahead).
func followFrom(q semQueue) int {
	i := max(len(q.ahead)-maxSemFollow, 0)
	used := 0
	for _, e := range q.ahead[i:] {
		used += e.permits
	}
	for i > 0 && used+q.mine.permits <= q.mine.limit {
		i--
		used += q.ahead[i].permits
	}
	return i
}

// keepsOut reports whether the keys near, all there, keep mine from
// holding whatever the keys before them do.
func keepsOut(near []semEntry, mine semEntry) bool {
	used := mine.permits
	for _, e := range near {
		used += e.permits
	}
	return used > mine.limit
}

// waitFor follows the deletions of our key and of the keys q says are
// ahead (the newest of them, see followFrom) until our key holds, or until
// a read of the queue shows fewer keys ahead, and returns the view that
// shows it; the caller calls it again with that view unless it holds.
func (w *semWaiter) waitFor(ctx context.Context, q semQueue) (semQueue, error) {
	from := followFrom(q)
	ready := make(chan struct{}, 1)
	names := []string{w.ekey}
	for _, e := range q.ahead[from:] {
		names = append(names, e.name)
	}
	subs, err := w.d.subscribeAll(ctx, "wait for permits of", w.key, names, q.rev, ready, func(string) bool { return true }) // kept: see subscribe
	defer closeSubs(subs)
	if err != nil {
		return semQueue{}, err
	}
	if covered, err := w.started(ctx, subs, "wait for permits of"); err != nil || covered > q.rev {
		if err != nil {
			return semQueue{}, err
		}
		// Deletions between our read and a watch's start may be missing.
		return w.read(ctx, covered)
	}
	near, older := slices.Clone(q.ahead[from:]), from
	poll := time.NewTimer(recheckDelay(youngest(subs)))
	defer poll.Stop()
	for {
		if signalled, err := w.await(ctx, "wait for permits of", ready, poll); err != nil {
			return semQueue{}, err
		} else if !signalled {
			// A young watch's events may come late: read the queue.
			cur, err := w.read(ctx, q.rev)
			if err != nil || cur.holds || len(cur.ahead) < older+len(near) {
				return cur, err
			}
			poll.Reset(recheckDelay(youngest(subs)))
			continue
		}
		before := len(near)
		var last int64
		var err error
		if near, last, err = w.dropDeletedNear(ctx, subs, q.rev, near); err != nil {
			return semQueue{}, err
		}
		if len(near) == before {
			continue // none of the keys we wait for left
		}
		switch {
		case older > 0 && keepsOut(near, q.mine):
		case older > 0:
			return w.read(ctx, last) // see which older keys are left
		case !fits(near, q.mine):
		case time.Until(w.s.validUntil()) > w.s.ttl/3:
			// Our key is there while our lease lives (see waiter.waitFor).
			return semQueue{rev: last, ahead: near, mine: q.mine, holds: true, present: true}, nil
		default:
			return w.read(ctx, last)
		}
	}
}

// dropDeletedNear takes the deletions after rev that subs' watches
// reported off near and returns near with the newest of their revisions
// (0 if none was new); an error if our key was deleted or a watch ended.
func (w *semWaiter) dropDeletedNear(ctx context.Context, subs []*lockSub, rev int64, near []semEntry) ([]semEntry, int64, error) {
	var last int64
	for _, sub := range subs {
		for _, ev := range sub.take() {
			if ev.rev <= rev {
				continue // the view read at rev reflects it (or it is of an earlier key of that name)
			}
			if ev.key == w.ekey {
				return nil, 0, fmt.Errorf("etcdlock: wait for permits of %q: %w: our key %s was deleted while waiting", w.key, backend.ErrLost, w.ekey)
			}
			near = slices.DeleteFunc(near, func(e semEntry) bool { return e.name == ev.key })
			last = max(last, ev.rev)
		}
	}
	for _, sub := range subs {
		if sub.ended() {
			return nil, 0, w.watchEnded(ctx, sub.w)
		}
	}
	return near, last, nil
}

// read reads the queue up to our key, as of revision minRev or later, and
// checks that our key is still there. As the mutex waiter's predecessor,
// it reads serializably first (a lagging member can only show keys that
// are gone since, never a grant too early) and linearizably when that
// reply is older than minRev.
func (w *semWaiter) read(ctx context.Context, minRev int64) (semQueue, error) {
	opts := []clientv3.OpOption{clientv3.WithPrefix(), clientv3.WithMaxCreateRev(w.rev),
		clientv3.WithSort(clientv3.SortByCreateRevision, clientv3.SortAscend)}
	resp, err := w.d.c.Get(ctx, w.rng, append(opts, clientv3.WithSerializable())...)
	if err == nil && resp.Header.Revision < minRev {
		resp, err = w.d.c.Get(ctx, w.rng, opts...)
	}
	if err != nil {
		return semQueue{}, w.d.wrap(ctx, "wait for permits of", w.key, err)
	}
	q := readSemQueue(resp.Header.Revision, w.rev, resp.Kvs)
	if !q.present {
		return semQueue{}, fmt.Errorf("etcdlock: wait for permits of %q: %w: our key %s disappeared while waiting", w.key, backend.ErrLost, w.ekey)
	}
	return q, nil
}
