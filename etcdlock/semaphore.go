package etcdlock

import (
	"context"
	"fmt"
	"strconv"
	"strings"

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

// semQueue is one read of a semaphore's range, as the key created at
// revision rev judges it: the keys ahead of ours, whether ours holds (see
// above), and whether it is still there.
type semQueue struct {
	rev     int64      // the revision the read saw
	ahead   []semEntry // the keys older than ours, oldest first
	mine    semEntry   // our key (when present)
	holds   bool       // our key and every key before it hold
	present bool       // our key is in the range
}

// A semEntry is one key of a semaphore's queue: its name, permits and
// limit.
type semEntry struct {
	name           string
	permits, limit int
}

// readSemQueue judges the key created at revision mine from kvs, the
// range in create-revision order.
func readSemQueue(rev, mine int64, kvs []*mvccpb.KeyValue) semQueue {
	q := semQueue{rev: rev}
	for _, kv := range kvs {
		if kv.CreateRevision > mine {
			break
		}
		p, l := permitsOf(kv.Value)
		e := semEntry{name: string(kv.Key), permits: p, limit: l}
		if kv.CreateRevision == mine {
			q.mine, q.present = e, true
			break
		}
		q.ahead = append(q.ahead, e)
	}
	q.holds = q.present && fits(q.ahead, q.mine)
	return q
}

// fits reports whether mine holds behind ahead (oldest first): every key
// of ahead holds, and their permits plus its own are within its limit.
func fits(ahead []semEntry, mine semEntry) bool {
	used := 0
	for _, e := range ahead {
		if used+e.permits > e.limit {
			return false // this key waits, and so does every key after it
		}
		used += e.permits
	}
	return used+mine.permits <= mine.limit
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
func (d *Driver) putPermitKey(ctx context.Context, req backend.Request) (*session, ekey, semQueue, int64, error) {
	s, err := d.session(ctx)
	if err != nil {
		return nil, ekey{}, semQueue{}, 0, fmt.Errorf("etcdlock: acquire permits of %q: %w", req.Key, err)
	}
	k := d.nextSemKey(req.Key, s)
	resp, err := d.putTxn(ctx, s, k, []clientv3.Cmp{clientv3.Compare(clientv3.CreateRevision(k.name), "=", 0)},
		clientv3.OpPut(k.name, strconv.Itoa(req.Permits)+" "+strconv.Itoa(req.Limit)+" "+req.Owner, clientv3.WithLease(s.id)),
		clientv3.OpGet(semRange(d.prefix, req.Key), clientv3.WithPrefix(), clientv3.WithSort(clientv3.SortByCreateRevision, clientv3.SortAscend)))
	if err != nil {
		return nil, ekey{}, semQueue{}, 0, err
	}
	if !resp.Succeeded {
		return nil, ekey{}, semQueue{}, 0, fmt.Errorf("etcdlock: acquire permits of %q: %w: key %s exists already", req.Key, backend.ErrUnavailable, k.name)
	}
	rev := resp.Header.Revision
	return s, k, readSemQueue(rev, rev, resp.Responses[1].GetResponseRange().Kvs), rev, nil
}

// tryPermits is TryAcquire for a semaphore's permits: it queues and, unless
// its key holds at once, deletes the key again (a second round trip). It
// never jumps the queue: waiters before it count.
func (d *Driver) tryPermits(ctx context.Context, req backend.Request) (backend.Grant, error) {
	s, k, q, rev, err := d.putPermitKey(ctx, req)
	if err != nil {
		return backend.Grant{}, err
	}
	if !q.holds {
		return backend.Grant{}, d.failed(s, k, true, backend.NotAcquired(req.Key, 0))
	}
	return d.grant(s, req, k, rev)
}

// waitPermits is Wait for a semaphore's permits: it queues, then follows
// the deletions of the keys ahead of its own until they say it holds
// (semwait.go).
func (d *Driver) waitPermits(ctx context.Context, req backend.Request) (backend.Grant, error) {
	s, k, q, rev, err := d.putPermitKey(ctx, req)
	if err != nil {
		return backend.Grant{}, err
	}
	if !q.holds {
		d.startIdleWatch() // waits share one watch stream (idlewatch.go)
		w := &semWaiter{waiter{d: d, s: s, key: req.Key, rng: semRange(d.prefix, req.Key), ekey: k.name, rev: rev}}
		if err := w.wait(ctx, q); err != nil {
			return backend.Grant{}, d.failed(s, k, true, err)
		}
	}
	return d.grant(s, req, k, rev)
}
