package redlock

import (
	"context"
	"errors"
	"fmt"

	"github.com/distlock/distlock/backend"
	"github.com/distlock/distlock/internal/redisproto"
)

// newToken picks the fencing token of a grant from the granting nodes'
// replies. A re-entry keeps its hold's token T only if every granting node
// records the owner's lock with T and no granting node has counted past
// it: the hold then lived on a majority since T was minted, so no other
// holder can have had a later token. Anything else (a new lock, or a stale
// hold of the owner surviving on some nodes only, whose old token a holder
// in between has surpassed) gets a new token above every counter and token
// seen.
func newToken(res []redisproto.AcquireResult) uint64 {
	var keep, top uint64
	first, same := true, true
	for _, r := range res {
		if !r.Held {
			continue
		}
		if first {
			keep, first = r.Token, false
		}
		same = same && r.Token == keep
		top = max(top, r.Token, r.Counter)
	}
	if same && keep != 0 && keep >= top {
		return keep
	}
	return top + 1
}

// fence makes a majority record token (phase two): the granting nodes
// whose lock records token and whose counter reached it already do;
// the others get redisproto.FenceScript, all at once, and the grant stands when a
// majority recorded token. In the common case (a free lock whose counters
// agree on every node) no node needs it and this sends nothing.
func (r *Driver) fence(ctx context.Context, ks redisproto.Keyset, req backend.Request, hold string, token uint64, res []redisproto.AcquireResult) error {
	confirmed := 0
	var need []int
	for i, a := range res {
		switch {
		case !a.Held:
		case a.Token == token && a.Counter >= token:
			confirmed++
		default:
			need = append(need, i)
		}
	}
	var errs []error
	if len(need) > 0 {
		var ok []bool
		ok, errs = someNodes(r, ctx, nodeTimeout(req.TTL, 1), need, func(ctx context.Context, i int, n *node) (bool, error) {
			v, err := redisproto.FenceScript.Run(ctx, n.c, []string{ks.Lock, ks.Fence}, req.Owner, token, hold).Int64()
			return err == nil && v == 1, err
		})
		for _, b := range ok {
			if b {
				confirmed++
			}
		}
	}
	if confirmed < r.quorum {
		return fmt.Errorf("%w: fencing token %d confirmed by %d of %d nodes (need %d; the others lost the lock or failed: %v)",
			backend.ErrUnavailable, token, confirmed, len(r.nodes), r.quorum, errors.Join(errs...))
	}
	return nil
}
