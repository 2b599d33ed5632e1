package etcdlock

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"go.etcd.io/etcd/api/v3/mvccpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/distlock/distlock/backend"
	"github.com/distlock/distlock/internal/backoff"
)

// cleanupTimeout bounds the deletion of a key left by a failed attempt.
const cleanupTimeout = time.Second

// putAttempt bounds an acquisition's put (see putCtx).
const putAttempt = 2 * time.Second

// putCtx is the context of an acquisition's put: it does not end with
// ctx. A put abandoned on the way to the server may still be applied after
// the deletion that cleans up the failed attempt (the two can reach the
// leader in either order, through different members or streams), leaving
// a key that the driver's lease keeps alive: a ghost holder or waiter for
// the driver's whole life. Waiting for the put's answer (up to putAttempt)
// makes its fate known, so the deletion surely comes after it; see
// putAbandoned for what the caller does then.
func putCtx(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.WithoutCancel(ctx), putAttempt)
}

// putAbandoned returns the error of an attempt whose ctx ended before its
// put was sent (nothing was put: the slot is freed) or while it was on
// its way (its key, now known put, is deleted); nil if ctx has not ended.
func (d *Driver) putAbandoned(ctx context.Context, s *session, k ekey, put bool) error {
	if ctx.Err() == nil {
		return nil
	}
	err := fmt.Errorf("etcdlock: acquire %q: %w", k.key, context.Cause(ctx))
	if !put {
		s.freeSlot(k.key, k.slot)
		return err
	}
	return d.failed(s, k, true, err)
}

// putTxn sends an attempt's one transaction, which puts k: if every cmp
// holds and k's name is not buried (see tombName), it runs ops, k's put
// among them. It returns putAbandoned's error for an attempt whose ctx
// ended before it was sent, or before its answer of a put that landed;
// and for a transaction that failed, its error, with k cleaned up (the
// put's fate is unknown). A refused transaction (Succeeded false) put
// nothing: what that means is the caller's to say.
func (d *Driver) putTxn(ctx context.Context, s *session, k ekey, cmps []clientv3.Cmp, ops ...clientv3.Op) (*clientv3.TxnResponse, error) {
	if err := d.putAbandoned(ctx, s, k, false); err != nil {
		return nil, err
	}
	pctx, cancel := putCtx(ctx) // see putCtx: the put's fate must be known
	resp, err := d.c.Txn(pctx).If(append(cmps, d.unburied(k))...).Then(ops...).Commit()
	cancel()
	if err != nil {
		return nil, d.failed(s, k, false, d.acquireErr(ctx, s, k.key, err))
	}
	if resp.Succeeded {
		if err := d.putAbandoned(ctx, s, k, true); err != nil {
			return nil, err
		}
	}
	return resp, nil
}

// tryMutex takes req.Key if its range is empty (no holder, no waiter),
// putting our key in the same transaction: one round trip once the lease
// exists. A busy lock leaves nothing behind.
func (d *Driver) tryMutex(ctx context.Context, req backend.Request) (backend.Grant, error) {
	s, err := d.session(ctx)
	if err != nil {
		return backend.Grant{}, fmt.Errorf("etcdlock: acquire %q: %w", req.Key, err)
	}
	rng := lockRange(d.prefix, req.Key)
	k := d.nextKey(req.Key, s)
	resp, err := d.putTxn(ctx, s, k, []clientv3.Cmp{clientv3.Compare(clientv3.CreateRevision(rng), "=", 0).WithPrefix()},
		clientv3.OpPut(k.name, req.Owner, clientv3.WithLease(s.id)))
	if err != nil {
		return backend.Grant{}, err
	}
	if !resp.Succeeded {
		s.freeSlot(req.Key, k.slot) // nothing was put
		return backend.Grant{}, backend.NotAcquired(req.Key, 0)
	}
	return d.grant(s, req, k, resp.Header.Revision)
}

// waitMutex puts our key at the end of req.Key's queue and waits until every key
// created before it is gone, watching only the key just before it. It
// returns ErrLost if the driver's lease ends or our key disappears first.
func (d *Driver) waitMutex(ctx context.Context, req backend.Request) (backend.Grant, error) {
	s, err := d.session(ctx)
	if err != nil {
		return backend.Grant{}, fmt.Errorf("etcdlock: acquire %q: %w", req.Key, err)
	}
	rng := lockRange(d.prefix, req.Key)
	k := d.nextKey(req.Key, s)
	ekey := k.name
	// Our put has the highest revision in the range: the newest near+1
	// keys are ours and the near keys just ahead of it.
	resp, err := d.putTxn(ctx, s, k, []clientv3.Cmp{clientv3.Compare(clientv3.CreateRevision(ekey), "=", 0)},
		clientv3.OpPut(ekey, req.Owner, clientv3.WithLease(s.id)),
		clientv3.OpGet(rng, clientv3.WithPrefix(), clientv3.WithKeysOnly(),
			clientv3.WithSort(clientv3.SortByCreateRevision, clientv3.SortDescend), clientv3.WithLimit(int64(d.near)+1)))
	if err != nil {
		return backend.Grant{}, err
	}
	if !resp.Succeeded {
		// Not ours (its slot stays in use): the next attempt takes another name.
		return backend.Grant{}, fmt.Errorf("etcdlock: acquire %q: %w: key %s exists already", req.Key, backend.ErrUnavailable, ekey)
	}
	rev := resp.Header.Revision
	w := &waiter{d: d, s: s, key: req.Key, rng: rng, ekey: ekey, rev: rev}
	newest := (*clientv3.GetResponse)(resp.Responses[1].GetResponseRange())
	newest.Kvs = slices.DeleteFunc(newest.Kvs, func(kv *mvccpb.KeyValue) bool { return kv.CreateRevision == rev })
	qv := readQueue(rev, newest)
	if !qv.first() {
		d.startIdleWatch() // this acquisition will watch
	}
	if err := w.wait(ctx, qv); err != nil {
		return backend.Grant{}, d.failed(s, k, true, err)
	}
	trace(d, "granted", w.rev)
	return d.grant(s, req, k, w.rev)
}

// grant records a held lock. Its validity starts when the lease was last
// confirmed alive, which may be before the wait began: the server keeps
// the lease at least a TTL from then.
func (d *Driver) grant(s *session, req backend.Request, k ekey, rev int64) (backend.Grant, error) {
	l := &lock{d: d, s: s, key: req.Key, owner: req.Owner, ekey: k.name, slot: k.slot, rev: rev, token: uint64(rev)}
	if err := s.held.Track(l, req.Hooks()); err != nil {
		err := fmt.Errorf("etcdlock: acquire %q: %w", req.Key, err)
		return backend.Grant{}, d.failed(s, k, true, err)
	}
	d.mu.Lock()
	d.held[heldKey{req.Key, l.token}] = l
	d.mu.Unlock()
	if time.Since(s.confirmedAt()) > s.ttl/2 {
		// Renewals failed lately (a leader election, say): confirm the
		// lease now rather than hand out a grant with little validity
		// left. On failure the older confirmation stands.
		d.renewNow(s)
	}
	return backend.Grant{Lock: l, Token: l.token, TTL: s.ttl, ValidFrom: s.confirmedAt()}, nil
}

// failed deletes k, which a failed attempt may have left in the store, and
// returns err. put tells whether the attempt's put is known to have been
// applied (it answered); if so, a successful deletion frees k's name slot,
// else the slot stays in use (a put still in flight could create the key
// again). If the key cannot be deleted within cleanupTimeout, a background
// goroutine keeps trying for as long as the lease lives, so the key never
// outlives both the attempt and the lease as a ghost holder or waiter; err
// then also wraps ErrUnavailable.
func (d *Driver) failed(s *session, k ekey, put bool, err error) error {
	ctx, cancel := context.WithTimeout(d.ctx, cleanupTimeout)
	defer cancel()
	if derr := d.cleanup(ctx, s, k, put); derr == nil {
		if put {
			s.freeSlot(k.key, k.slot)
		}
		return err
	}
	ekey := k.name
	d.orphan(s, k, put)
	if errors.Is(err, backend.ErrUnavailable) {
		return err
	}
	return fmt.Errorf("%w (%w: key %s left to expire with its lease)", err, backend.ErrUnavailable, ekey)
}

// unburied is the condition every put of k's key carries: k's tombstone
// is absent (see tombName).
func (d *Driver) unburied(k ekey) clientv3.Cmp {
	return clientv3.Compare(clientv3.CreateRevision(tombName(d.prefix, k.name)), "=", 0)
}

// cleanup deletes k's key. If its put's fate is unknown (put false: the
// put may still be on its way, held up in a connection or a member, and
// could land after any deletion), it buries k instead: one transaction
// deletes the key and creates k's tombstone on the session's lease, so a
// put that lands later fails its unburied condition. The name's slot
// stays in use, and the tombstone goes with the lease.
func (d *Driver) cleanup(ctx context.Context, s *session, k ekey, put bool) error {
	if put {
		_, err := d.c.Delete(ctx, k.name)
		return err
	}
	_, err := d.c.Txn(ctx).Then(
		clientv3.OpPut(tombName(d.prefix, k.name), "", clientv3.WithLease(s.id)),
		clientv3.OpDelete(k.name)).Commit()
	return err
}

// orphan cleans k up (see cleanup) in an owned goroutine, retrying until it
// succeeds, the lease ends (taking the key with it) or the driver closes.
func (d *Driver) orphan(s *session, k ekey, put bool) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.closed {
		return
	}
	d.wg.Go(func() {
		var bo backoff.Backoff
		for {
			ctx, cancel := context.WithTimeout(d.ctx, cleanupTimeout)
			err := d.cleanup(ctx, s, k, put)
			cancel()
			if err == nil {
				return
			}
			t := time.NewTimer(bo.Next(50*time.Millisecond, time.Second))
			select {
			case <-t.C:
			case <-s.done:
				t.Stop()
				return
			case <-d.ctx.Done():
				t.Stop()
				return
			}
		}
	})
}

// acquireErr gives a failed put its kind. A put refused because the lease
// is gone ends the session and is retryable (ErrUnavailable): the next
// attempt grants a new lease.
func (d *Driver) acquireErr(ctx context.Context, s *session, key string, err error) error {
	if errors.Is(err, rpctypes.ErrLeaseNotFound) && ctx.Err() == nil {
		d.loseSession(s, err)
		return fmt.Errorf("etcdlock: acquire %q: %w: %w", key, backend.ErrUnavailable, err)
	}
	return d.wrap(ctx, "acquire", key, err)
}
