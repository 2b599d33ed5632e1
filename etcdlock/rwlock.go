package etcdlock

import (
	"context"
	"fmt"
	"time"

	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/distlock/distlock/backend"
)

// Read-write locks (backend.Read and backend.Write requests, queued by backend.Waiter): the ordering of
// the mutex, by create revision, with two kinds of keys. Every attempt
// puts one key, bound to the driver's lease, in the range
//
//	<prefix>%<escaped key>%rw/
//
// named w<lease>.<slot> for a writer and r<lease>.<slot> for a reader.
// The escaped key holds '%' only in %25 and %2F, so this range never
// overlaps a mutex's range (<prefix>%<escaped key>/) or another key's,
// and List skips it. A writer holds when its key is the oldest in the
// range; a reader when no writer's key is older than its own. A waiter
// follows only the key it depends on (a writer its predecessor, a reader
// the newest older writer), through the driver's lasting watch of that key
// (lockwatch.go), until it is deleted, then reads again (see rwWaiter). So
// a queued writer keeps every later reader out. A transient failure of
// the store keeps a waiter's key, so its place in line (waitInLine).
//
// Tokens: every granted writer puts <prefix>%<escaped key>%rwfence (no
// lease: it stays, as Redis keeps its counter), and its token is the
// revision of that put, strictly increasing across writers; a reader's
// token is that key's mod revision, read in the transaction that grants
// it: the last write's token.

func rwRange(prefix, key string) string { return prefix + "%" + escapeKey(key) + "%rw/" }
func rwFence(prefix, key string) string { return prefix + "%" + escapeKey(key) + "%rwfence" }

func rwSide(mode backend.Kind) string {
	if mode == backend.Write {
		return "w"
	}
	return "r"
}

// nextRWKey names an attempt's key. Its slot comes from the same
// allocator as the mutex's keys of the same user key, so every name is
// unique and Release frees the right slot.
func (d *Driver) nextRWKey(key string, s *session, mode backend.Kind) ekey {
	slot := s.takeSlot(key)
	return ekey{key: key, name: fmt.Sprintf("%s%s%x.%x", rwRange(d.prefix, key), rwSide(mode), int64(s.id), slot), slot: slot}
}

// blockerOps reads, after our key (rev) exists, the key we depend on: the
// newest older key (a writer) or the newest older writer (a reader).
func (d *Driver) blockerOp(key string, mode backend.Kind, rev int64) clientv3.Op {
	rng := rwRange(d.prefix, key)
	if mode == backend.Read {
		rng += "w"
	}
	return clientv3.OpGet(rng, clientv3.WithPrefix(), clientv3.WithKeysOnly(), clientv3.WithMaxCreateRev(rev-1),
		clientv3.WithSort(clientv3.SortByCreateRevision, clientv3.SortDescend), clientv3.WithLimit(1))
}

// rwSession checks mode (a side: Read or Write) and returns the session
// an acquisition of key's side puts its key on.
func (d *Driver) rwSession(ctx context.Context, key string, mode backend.Kind) (*session, error) {
	if mode != backend.Read && mode != backend.Write {
		return nil, fmt.Errorf("etcdlock: acquire %q: %w: rw mode %v", key, backend.ErrInvalidConfig, mode)
	}
	s, err := d.session(ctx)
	if err != nil {
		return nil, fmt.Errorf("etcdlock: acquire %q: %w", key, err)
	}
	return s, nil
}

// tryRW is TryAcquire for a side of a read-write lock: one transaction that puts our
// key only if nothing keeps it out (any key for a writer, a writer's key
// for a reader). A writer's transaction also puts the fence key; a
// reader's reads it. A refused attempt leaves nothing.
func (d *Driver) tryRW(ctx context.Context, req backend.Request, mode backend.Kind, _ bool) (backend.Grant, error) {
	s, err := d.rwSession(ctx, req.Key, mode)
	if err != nil {
		return backend.Grant{}, err
	}
	k := d.nextRWKey(req.Key, s, mode)
	fence := rwFence(d.prefix, req.Key)
	busy := rwRange(d.prefix, req.Key)
	third := clientv3.OpGet(fence)
	if mode == backend.Read {
		busy += "w"
	} else {
		third = clientv3.OpPut(fence, "")
	}
	resp, err := d.putTxn(ctx, s, k, []clientv3.Cmp{clientv3.Compare(clientv3.CreateRevision(busy), "=", 0).WithPrefix()},
		clientv3.OpPut(k.name, req.Owner, clientv3.WithLease(s.id)), third)
	if err != nil {
		return backend.Grant{}, err
	}
	if !resp.Succeeded {
		s.freeSlot(req.Key, k.slot) // nothing was put
		return backend.Grant{}, backend.NotAcquired(req.Key, 0)
	}
	rev := resp.Header.Revision
	token := uint64(rev)
	if mode == backend.Read {
		token = modRev(resp.Responses[1].GetResponseRange().Kvs)
	}
	return d.grantRW(s, req, k, rev, token)
}

func modRev(kvs []*mvccpb.KeyValue) uint64 {
	if len(kvs) == 0 {
		return 0
	}
	return uint64(kvs[0].ModRevision)
}

// waitRW is Wait for a side of a read-write lock: one transaction puts our key and,
// if nothing keeps it out, grants it (a writer's also puts the fence key,
// a reader's reads it), else reads the key it depends on. It then waits,
// watching only that key, until none is left; a writer then puts the
// fence key if its own key is still there. Transient failures keep our
// key and are retried (rwWaiter.wait); when the wait ends otherwise (ctx,
// lost lease, closed driver), our key is deleted.
func (d *Driver) waitRW(ctx context.Context, req backend.Request, mode backend.Kind) (backend.Grant, error) {
	s, err := d.rwSession(ctx, req.Key, mode)
	if err != nil {
		return backend.Grant{}, err
	}
	k := d.nextRWKey(req.Key, s, mode)
	rng, fence := rwRange(d.prefix, req.Key), rwFence(d.prefix, req.Key)
	put := clientv3.OpPut(k.name, req.Owner, clientv3.WithLease(s.id))
	busy, free, newest := rng, clientv3.OpPut(fence, ""), int64(2) // a writer: our key and the one before
	if mode == backend.Read {
		busy, free, newest = rng+"w", clientv3.OpGet(fence), 1 // a reader: the newest writer
	}
	// The outer transaction puts nothing unless k is unburied (see
	// tombName); the inner one grants or queues.
	outer, err := d.putTxn(ctx, s, k, nil, clientv3.OpTxn(
		[]clientv3.Cmp{clientv3.Compare(clientv3.CreateRevision(busy), "=", 0).WithPrefix()},
		[]clientv3.Op{put, free},
		[]clientv3.Op{put, clientv3.OpGet(busy, clientv3.WithPrefix(), clientv3.WithKeysOnly(),
			clientv3.WithSort(clientv3.SortByCreateRevision, clientv3.SortDescend), clientv3.WithLimit(newest))}))
	if err != nil {
		return backend.Grant{}, err
	}
	if !outer.Succeeded {
		// Buried: a put of this name had an unknown fate. Not ours (its
		// slot stays in use): the next attempt takes another name.
		return backend.Grant{}, fmt.Errorf("etcdlock: acquire %q: %w: key %s was buried", req.Key, backend.ErrUnavailable, k.name)
	}
	rev := outer.Header.Revision
	resp := outer.Responses[0].GetResponseTxn()
	if resp.Succeeded {
		token := uint64(rev)
		if mode == backend.Read {
			token = modRev(resp.Responses[1].GetResponseRange().Kvs)
		}
		return d.grantRW(s, req, k, rev, token)
	}
	v := rwView{rev: rev}
	queue := resp.Responses[1].GetResponseRange()
	for _, kv := range queue.Kvs {
		if kv.CreateRevision < rev {
			v.blocker, v.complete = string(kv.Key), !queue.More
			break
		}
	}
	w := &rwWaiter{waiter: waiter{d: d, s: s, key: req.Key, rng: rng, ekey: k.name, rev: rev}, mode: mode}
	if err := w.wait(ctx, v); err != nil {
		return backend.Grant{}, d.failed(s, k, true, err)
	}
	return d.grantRW(s, req, k, rev, w.token)
}

// An rwWaiter is one queued acquisition of one side of a read-write lock:
// the mutex's waiter's fields (rng is the lock's read-write range), and
// its side. token is its grant's token, once it holds.
type rwWaiter struct {
	waiter
	mode  backend.Kind
	token uint64
}

// An rwView is where an rwWaiter stands: at revision rev (its last read),
// our key depended on blocker ("" to read what it depends on); complete
// tells that blocker was then the only key that kept ours out (a
// writer's only older key). free: no key keeps ours out any more, and a
// writer has yet to put the fence key; holds: the waiter holds.
type rwView struct {
	rev      int64
	blocker  string
	complete bool
	free     bool
	holds    bool
}

// wait returns nil once our key holds, with w.token set. As the mutex's
// and the semaphore's waits (waitInLine), a step that fails transiently
// (a read or a fence put failing with ErrUnavailable, the watch of the
// blocker ending: no leader, connection lost) keeps our key, so its place
// in line, and is retried with backoff while our lease lives and ctx
// lasts. Each step sends one request or follows one watch, so a failed
// step loses nothing the waiter had learned.
func (w *rwWaiter) wait(ctx context.Context, v rwView) error {
	return waitInLine(ctx, v, func(v rwView) bool { return v.holds }, w.step, w.pause)
}

// step moves the waiter one step: a writer that is free puts the fence
// key; a waiter with a blocker follows its deletion; else it reads what
// our key depends on.
//
// The waiter follows blocker's deletion through the driver's lasting
// watch of that key (lockwatch.go), as the mutex's and the semaphore's
// waiters do, then reads what it depends on next. A writer whose blocker
// was the only older key needs no read: no key older than ours can be
// created later, so it puts the fence key at once (recordWrite checks
// that our key is still there). A reader reads anyway: its token is the
// fence key's.
func (w *rwWaiter) step(ctx context.Context, v rwView) (rwView, error) {
	switch {
	case v.free:
		token, err := w.d.recordWrite(ctx, w.key, w.ekey, w.rev)
		if err != nil {
			return v, err
		}
		w.token = token
		return rwView{rev: v.rev, holds: true}, nil
	case v.blocker != "":
		gone, err := w.awaitDeleted(ctx, v.blocker, v.rev)
		if err != nil {
			return v, err
		}
		if gone && v.complete && w.mode == backend.Write {
			return rwView{rev: v.rev, free: true}, nil
		}
		return rwView{rev: v.rev}, nil // read what we depend on now
	default:
		return w.read(ctx)
	}
}

// read reads, in one transaction, our key (to check that it is still
// there), the key ours depends on (blockerOp) and the fence key.
func (w *rwWaiter) read(ctx context.Context) (rwView, error) {
	resp, err := w.d.c.Txn(ctx).Then(clientv3.OpGet(w.ekey, clientv3.WithKeysOnly()),
		w.d.blockerOp(w.key, w.mode, w.rev), clientv3.OpGet(rwFence(w.d.prefix, w.key))).Commit()
	if err != nil {
		return rwView{}, w.d.wrap(ctx, "wait for", w.key, err)
	}
	if own := resp.Responses[0].GetResponseRange().Kvs; len(own) == 0 || own[0].CreateRevision != w.rev {
		return rwView{}, fmt.Errorf("etcdlock: wait for %q: %w: our key %s disappeared while waiting", w.key, backend.ErrLost, w.ekey)
	}
	rev := resp.Header.Revision
	blockers := resp.Responses[1].GetResponseRange()
	switch {
	case len(blockers.Kvs) > 0:
		return rwView{rev: rev, blocker: string(blockers.Kvs[0].Key), complete: !blockers.More}, nil
	case w.mode == backend.Read:
		w.token = modRev(resp.Responses[2].GetResponseRange().Kvs)
		return rwView{rev: rev, holds: true}, nil
	default:
		return rwView{rev: rev, free: true}, nil
	}
}

// recordWrite puts the fence key for a writer whose key (name, rev) holds,
// and returns the put's revision: the writer's token. Put again after a
// failure whose fate is unknown, it only raises the fence key's revision:
// no other key holds meanwhile, so none saw the first.
func (d *Driver) recordWrite(ctx context.Context, key, name string, rev int64) (uint64, error) {
	resp, err := d.c.Txn(ctx).
		If(clientv3.Compare(clientv3.CreateRevision(name), "=", rev)).
		Then(clientv3.OpPut(rwFence(d.prefix, key), "")).
		Commit()
	if err != nil {
		return 0, d.wrap(ctx, "acquire", key, err)
	}
	if !resp.Succeeded {
		return 0, fmt.Errorf("etcdlock: acquire %q: %w: our key %s disappeared", key, backend.ErrLost, name)
	}
	return uint64(resp.Header.Revision), nil
}

// awaitDeleted follows blocker through the driver's shared watch of that
// key (lockwatch.go) and returns true once it reports blocker's deletion
// after revision seen. It returns false when the caller must read again
// instead: the watch started after seen (a deletion in between may be
// missing), or, while the watch is young (etcd may deliver its first
// events late, docs/etcd.md), every recheckEvery, and then every
// recheckSlow. It returns an error when ctx ends, the session is lost or
// the watch ends (ErrUnavailable: the wait retries).
func (w *rwWaiter) awaitDeleted(ctx context.Context, blocker string, seen int64) (bool, error) {
	ready := make(chan struct{}, 1)
	// Kept (see subscribe): the drivers contending for a read-write lock
	// wait behind each other's keys again and again.
	sub, err := w.d.subscribe(blocker, seen, ready, true)
	if err != nil {
		return false, w.d.wrap(ctx, "wait for", w.key, err)
	}
	defer sub.close()
	select {
	case <-sub.w.started:
	case <-sub.w.done:
		return false, w.watchEnded(ctx, sub.w)
	case <-w.s.done:
		return false, w.lostErr()
	case <-ctx.Done():
		return false, fmt.Errorf("etcdlock: wait for %q: %w", w.key, context.Cause(ctx))
	}
	if sub.covers() > seen {
		trace(w.d, "rw-created-reread", w.rev)
		return false, nil
	}
	poll := time.NewTimer(recheckDelay(sub.age()))
	defer poll.Stop()
	for {
		select {
		case <-ready:
		case <-poll.C:
			return false, nil
		case <-w.s.done:
			return false, w.lostErr()
		case <-ctx.Done():
			return false, fmt.Errorf("etcdlock: wait for %q: %w", w.key, context.Cause(ctx))
		}
		for _, ev := range sub.take() {
			// A deletion at or before seen is of an earlier key of that
			// name (names are reused, see takeSlot).
			if ev.rev > seen && ev.key == blocker {
				return true, nil
			}
		}
		if sub.ended() {
			return false, w.watchEnded(ctx, sub.w)
		}
	}
}

// grantRW records a held side. As for the mutex, its validity starts when
// the lease was last confirmed alive.
func (d *Driver) grantRW(s *session, req backend.Request, k ekey, rev int64, token uint64) (backend.Grant, error) {
	l := &lock{d: d, s: s, key: req.Key, ekey: k.name, slot: k.slot, rev: rev, token: token}
	if err := s.held.Track(l, req.Hooks()); err != nil {
		return backend.Grant{}, d.failed(s, k, true, fmt.Errorf("etcdlock: acquire %q: %w", req.Key, err))
	}
	if time.Since(s.confirmedAt()) > s.ttl/2 {
		d.renewNow(s)
	}
	return backend.Grant{Lock: l, Token: token, TTL: s.ttl, ValidFrom: s.confirmedAt()}, nil
}
