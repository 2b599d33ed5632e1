package etcdlock

import (
	"context"
	"fmt"
	"strings"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/distlock/distlock/backend"
)

// MaxMultiKeys is the most keys TryAcquireMulti takes in one transaction:
// each key has two comparisons (its range is empty, its name unburied: see
// tombName), and etcd's default limit on a transaction's comparisons and
// operations (the server's --max-txn-ops) is 128. A larger set is refused
// with ErrUnsupported, and distlock takes its keys one by one.
const MaxMultiKeys = 64

var _ backend.Batcher = (*Driver)(nil)

// TryAcquireMulti implements backend.Batcher: one transaction that
// puts every key's acquisition if every key's range is empty (no holder,
// no waiter: TryAcquire's comparison, once per key), and otherwise counts
// each range so the error can name a held key. One round trip once the
// lease exists; a busy set leaves nothing behind. Every put of a
// transaction has its revision, so each key's token is that revision.
func (d *Driver) TryAcquireMulti(ctx context.Context, reqs []backend.Request) ([]backend.Grant, error) {
	if len(reqs) == 0 {
		return nil, nil
	}
	what := multiName(reqs)
	if len(reqs) > MaxMultiKeys {
		return nil, fmt.Errorf("etcdlock: acquire %q: %w: %d keys, more than one transaction may take (%d)", what, backend.ErrUnsupported, len(reqs), MaxMultiKeys)
	}
	s, err := d.session(ctx)
	if err != nil {
		return nil, fmt.Errorf("etcdlock: acquire %q: %w", what, err)
	}
	ks := make([]ekey, len(reqs))
	cmps := make([]clientv3.Cmp, 0, 2*len(reqs))
	puts := make([]clientv3.Op, len(reqs))
	counts := make([]clientv3.Op, len(reqs))
	for i, req := range reqs {
		rng := lockRange(d.prefix, req.Key)
		ks[i] = d.nextKey(req.Key, s)
		cmps = append(cmps, clientv3.Compare(clientv3.CreateRevision(rng), "=", 0).WithPrefix(), d.unburied(ks[i]))
		puts[i] = clientv3.OpPut(ks[i].name, req.Owner, clientv3.WithLease(s.id))
		counts[i] = clientv3.OpGet(rng, clientv3.WithPrefix(), clientv3.WithCountOnly())
	}
	if err := ctx.Err(); err != nil {
		freeSlots(s, ks)
		return nil, fmt.Errorf("etcdlock: acquire %q: %w", what, context.Cause(ctx))
	}
	pctx, cancel := putCtx(ctx)
	resp, err := d.c.Txn(pctx).If(cmps...).Then(puts...).Else(counts...).Commit()
	cancel()
	if err != nil {
		return nil, d.failedAll(s, ks, false, d.acquireErr(ctx, s, what, err))
	}
	if !resp.Succeeded {
		freeSlots(s, ks) // nothing was put
		for i, r := range resp.Responses {
			if rr := r.GetResponseRange(); rr != nil && rr.Count > 0 {
				return nil, backend.NotAcquired(reqs[i].Key, 0)
			}
		}
		return nil, backend.NotAcquired(reqs[0].Key, 0)
	}
	if ctx.Err() != nil {
		return nil, d.failedAll(s, ks, true, fmt.Errorf("etcdlock: acquire %q: %w", what, context.Cause(ctx)))
	}
	grants := make([]backend.Grant, 0, len(reqs))
	for i, req := range reqs {
		g, err := d.grant(s, req, ks[i], resp.Header.Revision) // deletes ks[i] on failure
		if err != nil {
			for _, g := range grants {
				_ = g.Lock.Release(context.WithoutCancel(ctx))
			}
			return nil, d.failedAll(s, ks[i+1:], true, err)
		}
		grants = append(grants, g)
	}
	return grants, nil
}

// failedAll deletes every key of ks (see failed) and returns err.
func (d *Driver) failedAll(s *session, ks []ekey, put bool, err error) error {
	for _, k := range ks {
		err = d.failed(s, k, put, err)
	}
	return err
}

func freeSlots(s *session, ks []ekey) {
	for _, k := range ks {
		s.freeSlot(k.key, k.slot)
	}
}

// multiName names a set of keys in errors: the first few, and how many
// there are when there are more.
func multiName(reqs []backend.Request) string {
	const shown = 4
	keys := make([]string, 0, shown+1)
	for _, r := range reqs[:min(len(reqs), shown)] {
		keys = append(keys, r.Key)
	}
	if len(reqs) > shown {
		keys = append(keys, fmt.Sprintf("... (%d keys)", len(reqs)))
	}
	return strings.Join(keys, ", ")
}
