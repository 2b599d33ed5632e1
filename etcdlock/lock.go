package etcdlock

import (
	"context"
	"fmt"
	"sync"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/distlock/distlock/backend"
)

// lock is a held lock: one etcd key, bound to the session's lease, whose
// create revision is the lowest in its lock's range.
type lock struct {
	d     *Driver
	s     *session
	key   string // the user's key
	owner string // "" but for the mutex (announce.go)
	ekey  string // the etcd key
	slot  uint64 // its name slot in the session
	rev   int64  // its create revision: the fencing token
	token uint64
}

// owns is the comparison that holds while the lock's key still exists with
// its create revision.
func (l *lock) owns() clientv3.Cmp {
	return clientv3.Compare(clientv3.CreateRevision(l.ekey), "=", l.rev)
}

// Refresh renews the driver's lease (the lease is shared, so ttl cannot
// change the lock's lifetime) and checks that the lock's key still exists
// with its create revision.
func (l *lock) Refresh(ctx context.Context, ttl time.Duration) error {
	errs := l.d.RefreshAll(ctx, []backend.Lock{l}, []time.Duration{ttl})
	return errs[0]
}

// releaseAttempt bounds one release request. A write caught by the death
// of etcd's leader is only failed by the server after its request timeout
// (5 s + 2 election timeouts); a release that takes longer than this gives
// up and leaves the deletion to the background, which succeeds as soon as
// a new leader is elected.
const releaseAttempt = 2 * time.Second

// Release deletes the lock's key by its name. No other key of that name
// can exist meanwhile: the name holds the session's lease ID and a name
// slot that stays taken until this key is known gone with no deletion in
// flight (see takeSlot). So deleting the name is as fenced as a comparison
// on its create revision: a retried release never deletes a newer holder's
// key. A plain DeleteRange is one write with no comparison, measurably
// cheaper for etcd than a transaction. If the request fails, the key is
// deleted in the background as soon as the cluster answers again (its
// name slot then stays taken for the session's life), and the error wraps
// ErrUnavailable.
func (l *lock) Release(ctx context.Context) error {
	d := l.d
	actx, cancel := context.WithTimeout(ctx, releaseAttempt)
	defer cancel()
	trace(d, "rel-sent", l.rev)
	resp, err := d.c.Delete(actx, l.ekey)
	if err == nil {
		trace(d, "rel-done", resp.Header.Revision)
	}
	l.forget()
	if err == nil {
		l.s.freeSlot(l.key, l.slot) // the key is gone, by this deletion or before it
	}
	if err != nil {
		// The key may still be there, kept alive by the driver's lease:
		// keep deleting it in the background until it is gone or the
		// lease ends, so it never stays a ghost holder.
		d.orphan(l.s, ekey{key: l.key, name: l.ekey, slot: l.slot}, true)
		return d.wrap(ctx, "release", l.key, fmt.Errorf("%w (deletion continues in the background)", err))
	}
	if resp.Deleted == 0 {
		return fmt.Errorf("etcdlock: release %q: %w: key %s with create revision %d is gone", l.key, backend.ErrNotHeld, l.ekey, l.rev)
	}
	return nil
}

// forget removes l from the driver's bookkeeping.
func (l *lock) forget() {
	l.s.held.Untrack(l)
	l.forgetToken()
}

// forgetToken removes l from the driver's locks by key and token (OwnerCmp).
func (l *lock) forgetToken() {
	l.d.mu.Lock()
	if l.d.held[heldKey{l.key, l.token}] == l {
		delete(l.d.held, heldKey{l.key, l.token})
	}
	l.d.mu.Unlock()
}

// maxTxnOps stays under etcd's default --max-txn-ops (128).
const maxTxnOps = 100

// RefreshAll renews the lease of every session among locks (one keepalive
// each, normally one in all) and checks every lock's key in transactions
// of up to 100 reads, up to checkParallel of them at once.
func (d *Driver) RefreshAll(ctx context.Context, locks []backend.Lock, ttls []time.Duration) []error {
	errs := make([]error, len(locks))
	ls := backend.OwnLocks("etcdlock", locks, errs, func(l *lock) bool { return l.d == d })
	sessions := map[*session]error{}
	for _, l := range ls {
		if l != nil {
			sessions[l.s] = nil
		}
	}
	sent := time.Now()
	list := make([]*session, 0, len(sessions))
	for s := range sessions {
		list = append(list, s)
	}
	sessErrs := make([]error, len(list))
	var wg sync.WaitGroup
	for i, s := range list {
		wg.Go(func() { sessErrs[i] = d.refreshSession(ctx, s, sent) })
	}
	keyErrs := d.checkKeys(ctx, ls)
	wg.Wait()
	for i, s := range list {
		sessions[s] = sessErrs[i]
	}
	for i, l := range ls {
		if l == nil {
			continue
		}
		if err := sessions[l.s]; err != nil {
			errs[i] = fmt.Errorf("etcdlock: refresh %q: %w", l.key, err)
		} else {
			errs[i] = keyErrs[i]
		}
	}
	return errs
}

// refreshSession sends one keepalive for s.
func (d *Driver) refreshSession(ctx context.Context, s *session, sent time.Time) error {
	if s.lost() {
		return fmt.Errorf("%w: %w", backend.ErrNotHeld, s.cause())
	}
	if _, err := d.c.KeepAliveOnce(ctx, s.id); err != nil {
		err = d.wrap(ctx, "renew lease for", d.prefix, err)
		return err
	}
	s.confirmed(sent)
	return nil
}

// checkParallel bounds the key-check transactions of one refresh in
// flight at once.
const checkParallel = 8

// checkKeys reads every lock's key and reports ErrNotHeld for those gone
// or recreated. The reads go in transactions of up to maxTxnOps, up to
// checkParallel of them at once: a round's time grows with n/100 round
// trips divided by checkParallel rather than n/100 round trips.
func (d *Driver) checkKeys(ctx context.Context, ls []*lock) []error {
	errs := make([]error, len(ls))
	idx := make([]int, 0, len(ls))
	for i, l := range ls {
		if l != nil {
			idx = append(idx, i)
		}
	}
	check := func(idx []int) {
		ops := make([]clientv3.Op, len(idx))
		for j, i := range idx {
			ops[j] = clientv3.OpGet(ls[i].ekey, clientv3.WithKeysOnly())
		}
		resp, err := d.c.Txn(ctx).Then(ops...).Commit()
		for j, i := range idx {
			switch {
			case err != nil:
				errs[i] = d.wrap(ctx, "refresh", ls[i].key, err)
			default:
				kvs := resp.Responses[j].GetResponseRange().Kvs
				if len(kvs) == 0 || kvs[0].CreateRevision != ls[i].rev {
					// Gone: the portable layer releases it all the same,
					// which forgets it (and deletes by name: its name slot
					// is still taken, so nothing else has that name).
					errs[i] = fmt.Errorf("etcdlock: refresh %q: %w: key %s with create revision %d is gone", ls[i].key, backend.ErrNotHeld, ls[i].ekey, ls[i].rev)
				}
			}
		}
	}
	if len(idx) <= maxTxnOps {
		if len(idx) > 0 {
			check(idx)
		}
		return errs
	}
	sem := make(chan struct{}, checkParallel)
	var wg sync.WaitGroup
	for start := 0; start < len(idx); start += maxTxnOps {
		chunk := idx[start:min(start+maxTxnOps, len(idx))]
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			check(chunk)
		})
	}
	wg.Wait()
	return errs
}
