package etcdlock

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"time"

	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/distlock/distlock/backend"
)

// A waiter is one queued acquisition: our key ekey with create revision
// rev, waiting for every older key in rng to go.
//
// Each wait watches only the key just before ours, from the current
// revision (without a start revision), and re-reads the queue if anything
// was written before the watch started, so no deletion is missed. A watch
// with an older start revision would be "unsynced" in etcd's watchable
// store, which catches such watchers up only every 100 ms: that delay, paid
// at nearly every hand-off, is what limits etcd's concurrency.Mutex under
// contention (see docs/etcd.md).
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
func (w *waiter) wait(ctx context.Context, sg sighting) error {
	delay := 5 * time.Millisecond
	for sg.pred != nil {
		next, err := w.waitFor(ctx, sg)
		if err == nil {
			sg, delay = next, 5*time.Millisecond
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

// A sighting is what a read of the queue showed at revision rev: the key
// just older than ours (nil if none), and whether it was the holder.
type sighting struct {
	pred   *mvccpb.KeyValue
	holder bool
	rev    int64
}

// waitFor waits until sg.pred is deleted and returns what the queue looks
// like then.
//
// The watch starts at the current revision, so etcd registers it as synced
// (see the type's comment); its creation notice carries the revision it
// starts after. If nothing was written since sg was read, no deletion can
// have been missed; otherwise the queue is read again first.
//
// When pred was the holder (no key older), its deletion makes ours the
// oldest: no key created later can be older. Our own key can then only be
// gone if our lease expired, which cannot have happened while the lease's
// last confirmation is less than a TTL old (the grant's validity starts
// there), or if someone deleted it behind our back, which a holder's next
// refresh reports as it would after the grant. So that hand-off needs no
// further round trip.
func (w *waiter) waitFor(ctx context.Context, sg sighting) (sighting, error) {
	wctx, cancel := context.WithCancel(clientv3.WithRequireLeader(ctx))
	defer cancel()
	wch := w.d.c.Watch(wctx, string(sg.pred.Key), clientv3.WithCreatedNotify(), clientv3.WithFilterPut())
	var created clientv3.WatchResponse
	for !created.Created {
		wr, err := w.recv(ctx, wch, nil)
		if err != nil {
			return sighting{}, err
		}
		created = wr
	}
	if created.Header.Revision != sg.rev {
		cur, err := w.predecessor(ctx)
		if err != nil || cur.pred == nil || cur.pred.CreateRevision != sg.pred.CreateRevision {
			return cur, err
		}
		sg = cur
	}
	poll := time.NewTimer(recheckEvery)
	defer poll.Stop()
	rechecks := 0
	for {
		wr, err := w.recv(ctx, wch, poll.C)
		if errors.Is(err, errRecheck) {
			cur, err := w.predecessor(ctx)
			if err != nil || cur.pred == nil || cur.pred.CreateRevision != sg.pred.CreateRevision {
				return cur, err
			}
			if rechecks++; rechecks < maxRechecks {
				poll.Reset(recheckEvery)
			}
			continue
		}
		if err != nil {
			return sighting{}, err
		}
		for _, ev := range wr.Events {
			if ev.Type != mvccpb.DELETE {
				continue
			}
			if sg.holder && time.Until(w.s.validUntil()) > w.s.ttl/3 {
				return sighting{}, nil
			}
			return w.predecessor(ctx)
		}
	}
}

// A watch created while etcd commits a write can land in etcd's
// "unsynced" group, whose events are delivered only at the next resync,
// up to 100 ms later (etcd 3.4 reads the start revision before it takes
// the store's lock). Watches are synced after that, so a waiter re-reads
// the queue every recheckEvery during its watch's first 100 ms.
const (
	recheckEvery = 25 * time.Millisecond
	maxRechecks  = 4
)

// errRecheck is recv's answer when the recheck timer fired.
var errRecheck = errors.New("etcdlock: recheck")

// recv returns the next watch response, or why there is none (errRecheck
// when recheck fires first).
func (w *waiter) recv(ctx context.Context, wch clientv3.WatchChan, recheck <-chan time.Time) (clientv3.WatchResponse, error) {
	select {
	case wr, ok := <-wch:
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
	case <-recheck:
		return clientv3.WatchResponse{}, errRecheck
	case <-w.s.done:
		return clientv3.WatchResponse{}, w.lostErr()
	case <-ctx.Done():
		return clientv3.WatchResponse{}, fmt.Errorf("etcdlock: wait for %q: %w", w.key, context.Cause(ctx))
	}
}

// predecessor checks that our key still exists and reads the key just
// older than ours and the holder.
func (w *waiter) predecessor(ctx context.Context) (sighting, error) {
	resp, err := w.d.c.Txn(ctx).Then(
		clientv3.OpGet(w.ekey, clientv3.WithKeysOnly()),
		clientv3.OpGet(w.rng, clientv3.WithPrefix(), clientv3.WithKeysOnly(), clientv3.WithMaxCreateRev(w.rev-1),
			clientv3.WithSort(clientv3.SortByCreateRevision, clientv3.SortDescend), clientv3.WithLimit(1)),
		clientv3.OpGet(w.rng, clientv3.WithPrefix(), clientv3.WithKeysOnly(),
			clientv3.WithSort(clientv3.SortByCreateRevision, clientv3.SortAscend), clientv3.WithLimit(1)),
	).Commit()
	if err != nil {
		return sighting{}, w.d.wrap(ctx, "wait for", w.key, err)
	}
	if own := resp.Responses[0].GetResponseRange().Kvs; len(own) == 0 || own[0].CreateRevision != w.rev {
		return sighting{}, fmt.Errorf("etcdlock: wait for %q: %w: our key %s disappeared while waiting", w.key, backend.ErrLost, w.ekey)
	}
	sg := sighting{rev: resp.Header.Revision}
	if pred := resp.Responses[1].GetResponseRange().Kvs; len(pred) > 0 {
		first := resp.Responses[2].GetResponseRange().Kvs
		sg.pred, sg.holder = pred[0], len(first) > 0 && first[0].CreateRevision == pred[0].CreateRevision
	}
	return sg, nil
}

func (w *waiter) lostErr() error {
	return fmt.Errorf("etcdlock: wait for %q: %w: %w", w.key, backend.ErrLost, w.s.cause())
}
