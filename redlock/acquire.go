package redlock

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/distlock/distlock/backend"
	"github.com/distlock/distlock/internal/redisproto"
)

// TryAcquire implements backend.Driver. Phase one takes the lock on every
// node at once (one round trip per node, in parallel); a node that takes a
// free lock mints its next counter value as the lock's token. With a
// majority, the token is the one every granting node already records when
// they agree and none has counted past it (the common case: one round),
// else the highest counter or token seen plus one (see newToken), which
// phase two writes to the granting nodes that do not record it yet. The
// grant counts only if a majority records the token and the validity left
// (TTL − elapsed since the first request − drift) is positive. Otherwise
// the attempt's own hold is released on every node. The attempt stops
// waiting once the answers decide it (see decides): the first node and a
// majority granted with a token they already record. A node it did not
// wait for answers later; its grant stays for the lock's Release, or is
// given back at once when the hold is already being given back
// (giveBack).
//
// Concurrent attempts asked at once can split the votes so that none has
// a majority. The attempt holding the first node that answered it keeps
// its holds and asks the refusing nodes again for a short while (see
// splitWait): every other attempt of that split lacks that node, so it
// gives up and frees what it took, and one attempt wins, as the conformance
// case "of N concurrent TryAcquires exactly one wins" demands.
//
// In queue mode the first node runs the queue-aware script (redisproto.WaitScript,
// without queueing), so a free lock is not granted there ahead of a live
// waiter queued on it.
func (r *Driver) TryAcquire(ctx context.Context, req backend.Request) (backend.Grant, error) {
	if req.Kind != backend.Exclusive {
		return backend.Grant{}, backend.UnsupportedKind("redlock", "acquire", req.Kind)
	}
	if err := ctx.Err(); err != nil {
		// Nothing was sent: nothing to clean up.
		return backend.Grant{}, fmt.Errorf("redlock: acquire %q: %w", req.Key, context.Cause(ctx))
	}
	ks := r.keys(req.Key)
	hold := redisproto.NewID()
	first := time.Now()
	res := make([]redisproto.AcquireResult, len(r.nodes))
	errs := make([]error, len(r.nodes))
	back := &giveBack{}
	// ask sends the attempt to the nodes in only and records their
	// answers in res and errs; with early, it stops waiting once the
	// answers so far decide a grant (see decides).
	ask := func(only []int, early bool) {
		type reply struct {
			redisproto.AcquireResult
			node    int
			unknown bool // the call failed: the script may have run
		}
		var decided func(i int, v reply, err error) bool
		if early {
			// Nodes asked before (the first node, when contended)
			// count with their answers; the ones asked now as they come.
			seen := slices.Clone(res)
			answered := make([]bool, len(r.nodes))
			for i := range answered {
				answered[i] = true
			}
			for _, i := range only {
				seen[i], answered[i] = redisproto.AcquireResult{}, false
			}
			decided = func(i int, v reply, err error) bool {
				if err == nil {
					seen[i] = v.AcquireResult
				}
				answered[i] = true
				return r.decides(seen, answered)
			}
		}
		rs, es := nodesUntil(r, ctx, nodeTimeout(req.TTL, len(r.nodes)), only, func(ctx context.Context, i int, n *node) (reply, error) {
			var cmd *redis.Cmd
			if i == 0 && r.opts.Wait == WaitQueue {
				// Never ahead of a waiter queued on the first node.
				cmd = redisproto.WaitScript.Run(ctx, n.c, ks.WaitKeys(), req.Owner, redisproto.Millis(req.TTL), hold, "", "c")
			} else {
				cmd = redisproto.AcquireScript.Run(ctx, n.c, []string{ks.Lock, ks.Fence}, req.Owner, redisproto.Millis(req.TTL), hold)
			}
			a, err := redisproto.AcquireReply(cmd, req.TTL)
			if err != nil {
				return reply{node: i, unknown: true}, err
			}
			return reply{AcquireResult: a, node: i}, nil
		}, decided, func(late reply) {
			// The node answered after the attempt stopped waiting for
			// it. A grant is the attempt's hold like the others: it stays
			// for the lock's Release, unless the hold is being given back
			// already (Release or the failed attempt's cleanup started,
			// and may have reached the node before this script ran). A
			// call that failed may have run its script after that
			// release found nothing (the cleanup does not wait for a call
			// in flight): give the hold back now. A release of a hold the
			// node does not have changes nothing.
			if late.unknown || (late.Held && back.late()) {
				rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), redisproto.CleanupTimeout)
				defer cancel()
				_, _ = redisproto.ReleaseHold(rctx, r.nodes[late.node].c, ks, req.Owner, hold, "release")
			}
		})
		for _, i := range only {
			res[i], errs[i] = rs[i].AcquireResult, es[i]
		}
	}
	all := r.all
	if yield, busy := r.contended(req.Key); busy {
		// Others want this key too: ask the first node alone, and the
		// rest only if it granted (or failed), so that losers take no
		// node at all and split no vote. A driver that has just released
		// the key first gives the waiters its release woke the time to
		// reach the first node, instead of taking the lock straight back
		// (which would starve them).
		if yield > 0 && sleepCtx(ctx, yield) != nil {
			return backend.Grant{}, fmt.Errorf("redlock: acquire %q: %w", req.Key, context.Cause(ctx))
		}
		ask(all[:1], false)
		if errs[0] == nil && !res[0].Held {
			r.observe(req.Key)
			return backend.Grant{}, backend.NotAcquired(req.Key, res[0].PTTL)
		}
		ask(all[1:], true)
	} else {
		ask(all, true)
	}
	v := countVotes(res, errs)
	if v.split(r.quorum) {
		// A split vote, or a lock held elsewhere: only the attempt that
		// holds the first node it reached asks the refusing nodes again.
		v = r.askAgain(ctx, req.TTL, first, res, errs, func(only []int) { ask(only, false) }, func() bool { return r.holdsFirst(res, errs) })
	}
	held, refused, failed, retry := v.held, v.refused, v.failed, v.retry
	if refused > 0 {
		r.observe(req.Key)
	}
	fail := func(err error) (backend.Grant, error) {
		back.start()
		r.cleanup(ctx, ks, req.Owner, hold, res, errs)
		return backend.Grant{}, err
	}
	if held < r.quorum {
		if refused > len(r.nodes)-r.quorum || failed == 0 {
			return fail(backend.NotAcquired(req.Key, retry))
		}
		return fail(fmt.Errorf("redlock: acquire %q: %w: %d of %d nodes granted, %d failed (need %d): %w",
			req.Key, r.failKind(errs), held, len(r.nodes), failed, r.quorum, errors.Join(errs...)))
	}
	token := newToken(res)
	if err := r.fence(ctx, ks, req, hold, token, res); err != nil {
		return fail(fmt.Errorf("redlock: acquire %q: %w", req.Key, err))
	}
	if elapsed := time.Since(first); elapsed >= req.TTL-driftOf(req) {
		return fail(fmt.Errorf("redlock: acquire %q: %w: a majority granted, but only after %v of the %v TTL", req.Key, backend.ErrUnavailable, elapsed, req.TTL))
	}
	l := &rlock{r: r, key: req.Key, ks: ks, owner: req.Owner, hold: hold, back: back}
	return backend.Grant{Lock: l, Token: token, ValidFrom: first}, nil
}

// failKind is the portable kind of an attempt that failed on too many
// nodes (errs, one per node): ErrInvalidConfig when so many nodes refused
// the login or the ACL a command that no majority can ever grant (no
// retry fixes that), else ErrUnavailable.
func (r *Driver) failKind(errs []error) error {
	refused := 0
	for _, err := range errs {
		if err != nil && (redisproto.NotAllowed(err) || redisproto.ScriptRefused(err)) {
			refused++
		}
	}
	if refused > len(r.nodes)-r.quorum {
		return backend.ErrInvalidConfig
	}
	return backend.ErrUnavailable
}

// holdsFirst reports whether the attempt whose replies are res and errs
// holds the lowest-numbered node that answered it.
func (r *Driver) holdsFirst(res []redisproto.AcquireResult, errs []error) bool {
	for i := range r.nodes {
		if errs[i] == nil {
			return res[i].Held
		}
	}
	return false
}

// decides reports whether the answers so far (res, for the nodes marked
// in answered; an answer that failed is not held) decide a grant, so that
// an attempt need not wait for the other nodes: the first node granted
// (in queue mode a free lock is not granted there ahead of a queued
// waiter, and the split-vote rule goes by the first node that answered),
// and a majority of the nodes that granted already records the token
// those grants make (newToken), so that no fencing round is needed and
// the other nodes' answers cannot change it: they would only add grants
// (kept for Release: giveBack) or refusals. Every earlier token was
// confirmed by a majority, which shares a node with this one, whose
// counter this grant's token already passed.
func (r *Driver) decides(res []redisproto.AcquireResult, answered []bool) bool {
	if !answered[0] || !res[0].Held {
		return false
	}
	token := newToken(res)
	confirmed := 0
	for _, a := range res {
		if a.Held && a.Token == token && a.Counter >= token {
			confirmed++
		}
	}
	return confirmed >= r.quorum
}

// giveBack is what an attempt's node calls that answer late share with
// the attempt and its lock: whether the hold is being given back (the
// attempt failed and cleans up, or the lock's Release began).
type giveBack struct {
	mu      sync.Mutex
	started bool
}

// start records that the hold is being given back; call it before
// sending the releases.
func (g *giveBack) start() {
	g.mu.Lock()
	g.started = true
	g.mu.Unlock()
}

// late reports, for a grant that came after its attempt stopped waiting,
// whether its caller must give it back itself: the releases have begun
// and may have reached the node before the grant. Otherwise the hold's
// releases, sent after this grant was made, free it.
func (g *giveBack) late() bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.started
}

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

// driftOf is the margin the portable layer uses for req (it passes it in
// the request), else Redlock's default.
func driftOf(req backend.Request) time.Duration {
	if req.Drift > 0 {
		return req.Drift
	}
	return drift(req.TTL)
}

// drift is the Redlock clock-drift margin for ttl.
func drift(ttl time.Duration) time.Duration {
	return time.Duration(float64(ttl)*driftFactor) + driftFixed
}

// cleanup gives back a failed attempt's hold on every node that granted it
// or did not answer (its outcome is unknown), with its own short timeout.
// Other holds of the same owner are left alone.
//
// An attempt that did not hold the first node it reached gives its nodes
// back quietly (no "released" announcement): it lost a split vote to the
// attempt holding that node, or found the lock held, and what it frees is
// no lock anyone waits for; the winner's release, or the first node's
// holder giving up, announces the lock free.
func (r *Driver) cleanup(ctx context.Context, ks redisproto.Keyset, owner, hold string, res []redisproto.AcquireResult, errs []error) {
	ctx = context.WithoutCancel(ctx)
	first := r.holdsFirst(res, errs)
	eachNode(r, ctx, redisproto.CleanupTimeout, func(ctx context.Context, i int, n *node) (struct{}, error) {
		if res[i].Held || errs[i] != nil {
			mode := "quiet"
			if first {
				mode = announce(i)
			}
			_, err := redisproto.ReleaseHold(ctx, n.c, ks, owner, hold, mode)
			return struct{}{}, err
		}
		return struct{}{}, nil
	})
}
