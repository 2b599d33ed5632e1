package etcdlock

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/distlock/distlock/backend"
)

// Semaphores, natively: every acquisition (holder or waiter) puts one key
// in the semaphore's range, bound to the driver's lease as a lock's key
// is, whose value is "<permits> <limit> <owner>". The keys in
// create-revision order form a queue, and the keys that hold are a prefix
// of it: from the head, a key holds while every key before it holds and
// their permits plus its own are within ITS limit; the first that does
// not fit, and every key after it, waits. So a grant never puts more
// permits in use than the asker's limit (every holder is ahead of it),
// waiters are served in arrival order (fair; a waiter for many permits is
// not overtaken by later waiters for fewer, nor by later askers with a
// larger limit), and a key that holds keeps holding: keys only leave the
// queue or join its end. Its token is its create revision (grants follow
// the queue's order). A grant is a lock like any other of the driver (same
// refresh, release, session doubt and loss).
//
// The range is <prefix>%<escaped key>%sem/, which no lock's range
// contains or is contained in (an escaped key has no bare "%s"), so
// List and Inspect never see it.

var (
	_ backend.Semaphorer      = (*Driver)(nil)
	_ backend.SemaphoreWaiter = (*Driver)(nil)
)

// semRange returns the range of etcd keys of key's semaphore.
func semRange(prefix, key string) string {
	return prefix + "%" + escapeKey(key) + "%sem/"
}

// nextSemKey returns the etcd key of an acquisition of key's permits in
// s. It takes its name slot among the lock key's (a slot only has to be
// unique per session and key).
func (d *Driver) nextSemKey(key string, s *session) ekey {
	slot := s.takeSlot(key)
	return ekey{key: key, name: fmt.Sprintf("%s%x.%x", semRange(d.prefix, key), int64(s.id), slot), slot: slot}
}

// semQueue is one read of a semaphore's range: whether our key holds
// (see above), and whether it is still there.
type semQueue struct {
	rev     int64 // the revision the read saw
	holds   bool  // our key and every key before it hold
	present bool  // our key is in the range
}

// readSemQueue judges the key created at revision mine from kvs, the
// range in create-revision order.
func readSemQueue(rev, mine int64, kvs []*mvccpb.KeyValue) semQueue {
	q := semQueue{rev: rev}
	used := 0
	for _, kv := range kvs {
		if kv.CreateRevision > mine {
			break
		}
		p, l := permitsOf(kv.Value)
		if used+p > l {
			break // this key waits, and so does every key after it
		}
		used += p
		if kv.CreateRevision == mine {
			q.holds, q.present = true, true
		}
	}
	if !q.holds {
		q.present = slices.ContainsFunc(kvs, func(kv *mvccpb.KeyValue) bool { return kv.CreateRevision == mine })
	}
	return q
}

// permitsOf reads "<permits> <limit> <owner>". A value it cannot read is
// taken to ask for every permit (so that it waits, and every key after it).
func permitsOf(v []byte) (permits, limit int) {
	ps, rest, _ := strings.Cut(string(v), " ")
	ls, _, _ := strings.Cut(rest, " ")
	p, perr := strconv.Atoi(ps)
	l, lerr := strconv.Atoi(ls)
	if perr != nil || lerr != nil || p < 1 || l < 1 || l > backend.MaxSemaphoreLimit {
		return backend.MaxSemaphoreLimit + 1, backend.MaxSemaphoreLimit
	}
	return p, l
}

// putPermitKey puts our key at the end of the semaphore's queue and reads
// the queue in the same transaction: one round trip once the lease exists.
func (d *Driver) putPermitKey(ctx context.Context, req backend.SemaphoreRequest) (*session, ekey, semQueue, int64, error) {
	s, err := d.session(ctx)
	if err != nil {
		return nil, ekey{}, semQueue{}, 0, fmt.Errorf("etcdlock: acquire permits of %q: %w", req.Key, err)
	}
	k := d.nextSemKey(req.Key, s)
	if err := d.putAbandoned(ctx, s, k, false); err != nil {
		return nil, ekey{}, semQueue{}, 0, err
	}
	pctx, cancel := putCtx(ctx) // see putCtx: the put's fate must be known
	resp, err := d.c.Txn(pctx).
		If(clientv3.Compare(clientv3.CreateRevision(k.name), "=", 0), d.unburied(k)).
		Then(clientv3.OpPut(k.name, strconv.Itoa(req.Permits)+" "+strconv.Itoa(req.Limit)+" "+req.Owner, clientv3.WithLease(s.id)),
			clientv3.OpGet(semRange(d.prefix, req.Key), clientv3.WithPrefix(), clientv3.WithSort(clientv3.SortByCreateRevision, clientv3.SortAscend))).
		Commit()
	cancel()
	if err != nil {
		return nil, ekey{}, semQueue{}, 0, d.failed(s, k, false, d.acquireErr(ctx, s, req.Key, err))
	}
	if !resp.Succeeded {
		return nil, ekey{}, semQueue{}, 0, fmt.Errorf("etcdlock: acquire permits of %q: %w: key %s exists already", req.Key, backend.ErrUnavailable, k.name)
	}
	if err := d.putAbandoned(ctx, s, k, true); err != nil {
		return nil, ekey{}, semQueue{}, 0, err
	}
	rev := resp.Header.Revision
	return s, k, readSemQueue(rev, rev, resp.Responses[1].GetResponseRange().Kvs), rev, nil
}

// TryAcquirePermits implements backend.Semaphorer: it queues and, unless
// its key holds at once, deletes the key again (a second round trip). It
// never jumps the queue: waiters before it count.
func (d *Driver) TryAcquirePermits(ctx context.Context, req backend.SemaphoreRequest) (backend.Grant, error) {
	s, k, q, rev, err := d.putPermitKey(ctx, req)
	if err != nil {
		return backend.Grant{}, err
	}
	if !q.holds {
		return backend.Grant{}, d.failed(s, k, true, backend.NotAcquired(req.Key, 0))
	}
	return d.grant(s, req.Request, k, rev)
}

// WaitPermits implements backend.SemaphoreWaiter: it queues, then watches
// the semaphore's range for deletions (any key ahead that goes lowers the
// permits ahead) and re-reads the queue after each, until its key holds.
// Every waiter is woken by every release: a release costs one read per
// waiter.
func (d *Driver) WaitPermits(ctx context.Context, req backend.SemaphoreRequest) (backend.Grant, error) {
	s, k, q, rev, err := d.putPermitKey(ctx, req)
	if err != nil {
		return backend.Grant{}, err
	}
	if !q.holds {
		d.startIdleWatch() // waits share one watch stream (idlewatch.go)
	}
	for !q.holds {
		if q, err = d.waitSemQueue(ctx, s, req.Key, k, rev, q.rev); err != nil {
			return backend.Grant{}, d.failed(s, k, true, err)
		}
	}
	return d.grant(s, req.Request, k, rev)
}

// waitSemQueue waits for a deletion in the range after revision seen and
// reads the queue again.
func (d *Driver) waitSemQueue(ctx context.Context, s *session, key string, k ekey, mine, seen int64) (semQueue, error) {
	rng := semRange(d.prefix, key)
	wctx, cancel := context.WithCancel(clientv3.WithRequireLeader(ctx))
	defer cancel()
	wch := d.c.Watch(wctx, rng, clientv3.WithPrefix(), clientv3.WithRev(seen+1), clientv3.WithFilterPut())
	var pause <-chan time.Time // set when the watch failed
	select {
	case wr, ok := <-wch:
		if !ok || wr.Err() != nil {
			// Compaction, no leader: read again after a pause.
			t := time.NewTimer(semaphoreBackoff)
			defer t.Stop()
			pause = t.C
			break
		}
		for _, ev := range wr.Events {
			if string(ev.Kv.Key) == k.name {
				return semQueue{}, fmt.Errorf("etcdlock: wait for permits of %q: %w: our key %s was deleted while waiting", key, backend.ErrLost, k.name)
			}
		}
	case <-s.done:
		return semQueue{}, fmt.Errorf("etcdlock: wait for permits of %q: %w: %w", key, backend.ErrLost, s.cause())
	case <-ctx.Done():
		return semQueue{}, fmt.Errorf("etcdlock: wait for permits of %q: %w", key, context.Cause(ctx))
	}
	if pause != nil {
		select {
		case <-pause:
		case <-s.done:
			return semQueue{}, fmt.Errorf("etcdlock: wait for permits of %q: %w: %w", key, backend.ErrLost, s.cause())
		case <-ctx.Done():
			return semQueue{}, fmt.Errorf("etcdlock: wait for permits of %q: %w", key, context.Cause(ctx))
		}
	}
	resp, err := d.c.Get(ctx, rng, clientv3.WithPrefix(), clientv3.WithSort(clientv3.SortByCreateRevision, clientv3.SortAscend))
	if err != nil {
		return semQueue{}, d.wrap(ctx, "wait for permits of", key, err)
	}
	q := readSemQueue(resp.Header.Revision, mine, resp.Kvs)
	if !q.present {
		return semQueue{}, fmt.Errorf("etcdlock: wait for permits of %q: %w: our key %s disappeared while waiting", key, backend.ErrLost, k.name)
	}
	return q, nil
}

// semaphoreBackoff bounds how fast a waiter whose watch keeps failing
// re-reads the queue.
const semaphoreBackoff = 50 * time.Millisecond
