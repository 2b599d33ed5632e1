package etcdlock

import (
	"context"
	"fmt"
	"time"

	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/distlock/distlock/backend"
)

// Read-write locks (backend.RWLocker, backend.RWWaiter): the ordering of
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
// (lockwatch.go), until it is deleted, then reads again (see awaitRW). So
// a queued writer keeps every later reader out.
//
// Tokens: every granted writer puts <prefix>%<escaped key>%rwfence (no
// lease: it stays, as Redis keeps its counter), and its token is the
// revision of that put, strictly increasing across writers; a reader's
// token is that key's mod revision, read in the transaction that grants
// it: the last write's token.

var (
	_ backend.RWLocker = (*Driver)(nil)
	_ backend.RWWaiter = (*Driver)(nil)
)

func rwRange(prefix, key string) string { return prefix + "%" + escapeKey(key) + "%rw/" }
func rwFence(prefix, key string) string { return prefix + "%" + escapeKey(key) + "%rwfence" }

func rwSide(mode backend.RWMode) string {
	if mode == backend.Write {
		return "w"
	}
	return "r"
}

// nextRWKey names an attempt's key. Its slot comes from the same
// allocator as the mutex's keys of the same user key, so every name is
// unique and Release frees the right slot.
func (d *Driver) nextRWKey(key string, s *session, mode backend.RWMode) ekey {
	slot := s.takeSlot(key)
	return ekey{key: key, name: fmt.Sprintf("%s%s%x.%x", rwRange(d.prefix, key), rwSide(mode), int64(s.id), slot), slot: slot}
}

// blockerOps reads, after our key (rev) exists, the key we depend on: the
// newest older key (a writer) or the newest older writer (a reader).
func (d *Driver) blockerOp(key string, mode backend.RWMode, rev int64) clientv3.Op {
	rng := rwRange(d.prefix, key)
	if mode == backend.Read {
		rng += "w"
	}
	return clientv3.OpGet(rng, clientv3.WithPrefix(), clientv3.WithKeysOnly(), clientv3.WithMaxCreateRev(rev-1),
		clientv3.WithSort(clientv3.SortByCreateRevision, clientv3.SortDescend), clientv3.WithLimit(1))
}

// TryAcquireRW implements backend.RWLocker: one transaction that puts our
// key only if nothing keeps it out (any key for a writer, a writer's key
// for a reader). A writer's transaction also puts the fence key; a
// reader's reads it. A refused attempt leaves nothing.
func (d *Driver) TryAcquireRW(ctx context.Context, req backend.Request, mode backend.RWMode, _ bool) (backend.Grant, error) {
	if mode != backend.Read && mode != backend.Write {
		return backend.Grant{}, fmt.Errorf("etcdlock: acquire %q: %w: rw mode %v", req.Key, backend.ErrInvalidConfig, mode)
	}
	s, err := d.session(ctx)
	if err != nil {
		return backend.Grant{}, fmt.Errorf("etcdlock: acquire %q: %w", req.Key, err)
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
	if err := d.putAbandoned(ctx, s, k, false); err != nil {
		return backend.Grant{}, err
	}
	pctx, cancel := putCtx(ctx) // see putCtx: the put's fate must be known
	resp, err := d.c.Txn(pctx).
		If(clientv3.Compare(clientv3.CreateRevision(busy), "=", 0).WithPrefix(), d.unburied(k)).
		Then(clientv3.OpPut(k.name, req.Owner, clientv3.WithLease(s.id)), third).
		Commit()
	cancel()
	if err != nil {
		return backend.Grant{}, d.failed(s, k, false, d.acquireErr(ctx, s, req.Key, err))
	}
	if !resp.Succeeded {
		s.freeSlot(req.Key, k.slot) // nothing was put
		return backend.Grant{}, backend.NotAcquired(req.Key, 0)
	}
	if err := d.putAbandoned(ctx, s, k, true); err != nil {
		return backend.Grant{}, err
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

// WithdrawRW implements backend.RWLocker: a writer leaves no mark apart
// from its key, which a failed wait deletes.
func (d *Driver) WithdrawRW(context.Context, backend.Request) error { return nil }

// WaitRW implements backend.RWWaiter: one transaction puts our key and,
// if nothing keeps it out, grants it (a writer's also puts the fence key,
// a reader's reads it), else reads the key it depends on. It then waits,
// watching only that key, until none is left; a writer then puts the
// fence key if its own key is still there. On failure our key is deleted.
func (d *Driver) WaitRW(ctx context.Context, req backend.Request, mode backend.RWMode) (backend.Grant, error) {
	if mode != backend.Read && mode != backend.Write {
		return backend.Grant{}, fmt.Errorf("etcdlock: acquire %q: %w: rw mode %v", req.Key, backend.ErrInvalidConfig, mode)
	}
	s, err := d.session(ctx)
	if err != nil {
		return backend.Grant{}, fmt.Errorf("etcdlock: acquire %q: %w", req.Key, err)
	}
	k := d.nextRWKey(req.Key, s, mode)
	rng, fence := rwRange(d.prefix, req.Key), rwFence(d.prefix, req.Key)
	put := clientv3.OpPut(k.name, req.Owner, clientv3.WithLease(s.id))
	busy, free, newest := rng, clientv3.OpPut(fence, ""), int64(2) // a writer: our key and the one before
	if mode == backend.Read {
		busy, free, newest = rng+"w", clientv3.OpGet(fence), 1 // a reader: the newest writer
	}
	if err := d.putAbandoned(ctx, s, k, false); err != nil {
		return backend.Grant{}, err
	}
	pctx, cancel := putCtx(ctx) // see putCtx: the put's fate must be known
	// The outer transaction puts nothing unless k is unburied (see
	// tombName); the inner one grants or queues.
	outer, err := d.c.Txn(pctx).
		If(d.unburied(k)).
		Then(clientv3.OpTxn(
			[]clientv3.Cmp{clientv3.Compare(clientv3.CreateRevision(busy), "=", 0).WithPrefix()},
			[]clientv3.Op{put, free},
			[]clientv3.Op{put, clientv3.OpGet(busy, clientv3.WithPrefix(), clientv3.WithKeysOnly(),
				clientv3.WithSort(clientv3.SortByCreateRevision, clientv3.SortDescend), clientv3.WithLimit(newest))})).
		Commit()
	cancel()
	if err != nil {
		return backend.Grant{}, d.failed(s, k, false, d.acquireErr(ctx, s, req.Key, err))
	}
	if !outer.Succeeded {
		// Buried: a put of this name had an unknown fate. Not ours (its
		// slot stays in use): the next attempt takes another name.
		return backend.Grant{}, fmt.Errorf("etcdlock: acquire %q: %w: key %s was buried", req.Key, backend.ErrUnavailable, k.name)
	}
	if err := d.putAbandoned(ctx, s, k, true); err != nil {
		return backend.Grant{}, err
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
	var blocker string
	queue := resp.Responses[1].GetResponseRange()
	for _, kv := range queue.Kvs {
		if kv.CreateRevision < rev {
			blocker = string(kv.Key)
			break
		}
	}
	token, err := d.awaitRW(ctx, s, req.Key, k.name, mode, rev, blocker, blocker != "" && !queue.More)
	if err != nil {
		return backend.Grant{}, d.failed(s, k, true, err)
	}
	return d.grantRW(s, req, k, rev, token)
}

// awaitRW waits until our key (name, created at rev) depends on no other,
// and returns the grant's token. blocker is the key it depended on at
// revision rev ("" to read it); complete tells that no other key keeps
// ours out at rev (a writer's only older key is blocker).
//
// The waiter follows blocker's deletion through the driver's lasting watch
// of that key (lockwatch.go), as the mutex's and the semaphore's waiters
// do, then reads what it depends on next. A writer whose blocker was the
// only older key needs no read: no key older than ours can be created
// later, so it puts the fence key at once (recordWrite checks that our key
// is still there). A reader reads anyway: its token is the fence key's.
func (d *Driver) awaitRW(ctx context.Context, s *session, key, name string, mode backend.RWMode, rev int64, blocker string, complete bool) (uint64, error) {
	fence := rwFence(d.prefix, key)
	seen := rev
	for {
		if blocker != "" {
			gone, err := d.awaitDeleted(ctx, s, key, blocker, seen)
			if err != nil {
				return 0, err
			}
			if gone && complete && mode == backend.Write {
				return d.recordWrite(ctx, key, name, rev)
			}
		}
		resp, err := d.c.Txn(ctx).Then(clientv3.OpGet(name, clientv3.WithKeysOnly()), d.blockerOp(key, mode, rev), clientv3.OpGet(fence)).Commit()
		if err != nil {
			return 0, d.wrap(ctx, "wait for", key, err)
		}
		if own := resp.Responses[0].GetResponseRange().Kvs; len(own) == 0 || own[0].CreateRevision != rev {
			return 0, fmt.Errorf("etcdlock: wait for %q: %w: our key %s disappeared while waiting", key, backend.ErrLost, name)
		}
		blockers := resp.Responses[1].GetResponseRange()
		if len(blockers.Kvs) == 0 {
			if mode == backend.Read {
				return modRev(resp.Responses[2].GetResponseRange().Kvs), nil
			}
			return d.recordWrite(ctx, key, name, rev)
		}
		blocker, seen, complete = string(blockers.Kvs[0].Key), resp.Header.Revision, !blockers.More
	}
}

// recordWrite puts the fence key for a writer whose key (name, rev) holds,
// and returns the put's revision: the writer's token.
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
// the watch ends.
func (d *Driver) awaitDeleted(ctx context.Context, s *session, key, blocker string, seen int64) (bool, error) {
	ready := make(chan struct{}, 1)
	// Kept (see subscribe): the drivers contending for a read-write lock
	// wait behind each other's keys again and again.
	sub, err := d.subscribe(blocker, seen, ready, true)
	if err != nil {
		return false, d.wrap(ctx, "wait for", key, err)
	}
	defer sub.close()
	ended := func() error {
		sub.w.mu.Lock()
		err := sub.w.err
		sub.w.mu.Unlock()
		if err == nil {
			err = fmt.Errorf("watch of %s ended", blocker)
		}
		return d.wrap(ctx, "wait for", key, err)
	}
	select {
	case <-sub.w.started:
	case <-sub.w.done:
		return false, ended()
	case <-s.done:
		return false, fmt.Errorf("etcdlock: wait for %q: %w: %w", key, backend.ErrLost, s.cause())
	case <-ctx.Done():
		return false, fmt.Errorf("etcdlock: wait for %q: %w", key, context.Cause(ctx))
	}
	if sub.covers() > seen {
		return false, nil
	}
	poll := time.NewTimer(recheckDelay(sub.age()))
	defer poll.Stop()
	for {
		select {
		case <-ready:
		case <-poll.C:
			return false, nil
		case <-s.done:
			return false, fmt.Errorf("etcdlock: wait for %q: %w: %w", key, backend.ErrLost, s.cause())
		case <-ctx.Done():
			return false, fmt.Errorf("etcdlock: wait for %q: %w", key, context.Cause(ctx))
		}
		for _, ev := range sub.take() {
			// A deletion at or before seen is of an earlier key of that
			// name (names are reused, see takeSlot).
			if ev.rev > seen && ev.key == blocker {
				return true, nil
			}
		}
		if sub.ended() {
			return false, ended()
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
