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
	a := &attempt{r: r, req: req, ks: r.keys(req.Key), hold: redisproto.NewID(), first: time.Now(),
		res: make([]redisproto.AcquireResult, len(r.nodes)), errs: make([]error, len(r.nodes)), back: &giveBack{}}
	if err := a.askNodes(ctx); err != nil {
		return backend.Grant{}, err
	}
	v := countVotes(a.res, a.errs)
	if v.split(r.quorum) {
		// A split vote, or a lock held elsewhere: only the attempt that
		// holds the first node it reached asks the refusing nodes again.
		v = r.askAgain(ctx, req.TTL, a.first, a.res, a.errs, func(only []int) { a.ask(ctx, only, false) }, func() bool { return r.holdsFirst(a.res, a.errs) })
	}
	return a.conclude(ctx, v)
}

// attempt is one TryAcquire: its request, its hold, when it first asked,
// and each node's answer (res and errs, one entry per node).
type attempt struct {
	r     *Driver
	req   backend.Request
	ks    redisproto.Keyset
	hold  string
	first time.Time
	res   []redisproto.AcquireResult
	errs  []error
	back  *giveBack
}

// nodeReply is one node's answer to an attempt.
type nodeReply struct {
	redisproto.AcquireResult
	node    int
	unknown bool // the call failed: the script may have run
}

// askNodes sends the attempt to the nodes: every node at once, or, on a
// contended key, the first node alone and the others only if it granted.
// It fails, having taken nothing, when the first node refused or ctx ended
// while yielding.
func (a *attempt) askNodes(ctx context.Context) error {
	r, req := a.r, a.req
	all := r.all
	if yield, busy := r.contended(req.Key); busy {
		// Others want this key too: ask the first node alone, and the
		// rest only if it granted (or failed), so that losers take no
		// node at all and split no vote. A driver that has just released
		// the key first gives the waiters its release woke the time to
		// reach the first node, instead of taking the lock straight back
		// (which would starve them).
		if yield > 0 && sleepCtx(ctx, yield) != nil {
			return fmt.Errorf("redlock: acquire %q: %w", req.Key, context.Cause(ctx))
		}
		a.ask(ctx, all[:1], false)
		if a.errs[0] == nil && !a.res[0].Held {
			r.observe(req.Key)
			return backend.NotAcquired(req.Key, a.res[0].PTTL)
		}
		a.ask(ctx, all[1:], true)
	} else {
		a.ask(ctx, all, true)
	}
	return nil
}

// ask sends the attempt to the nodes in only and records their
// answers in res and errs; with early, it stops waiting once the
// answers so far decide a grant (see decides).
func (a *attempt) ask(ctx context.Context, only []int, early bool) {
	var decided func(i int, v nodeReply, err error) bool
	if early {
		decided = a.decider(only)
	}
	rs, es := nodesUntil(a.r, ctx, nodeTimeout(a.req.TTL, len(a.r.nodes)), only, a.call, decided, func(late nodeReply) { a.lateReply(ctx, late) })
	for _, i := range only {
		a.res[i], a.errs[i] = rs[i].AcquireResult, es[i]
	}
}

// decider returns ask's decided for a round sent to the nodes in only.
func (a *attempt) decider(only []int) func(i int, v nodeReply, err error) bool {
	// Nodes asked before (the first node, when contended)
	// count with their answers; the ones asked now as they come.
	seen := slices.Clone(a.res)
	answered := make([]bool, len(a.r.nodes))
	for i := range answered {
		answered[i] = true
	}
	for _, i := range only {
		seen[i], answered[i] = redisproto.AcquireResult{}, false
	}
	return func(i int, v nodeReply, err error) bool {
		if err == nil {
			seen[i] = v.AcquireResult
		}
		answered[i] = true
		return a.r.decides(seen, answered)
	}
}

// call runs the attempt's acquire script on node n (index i).
func (a *attempt) call(ctx context.Context, i int, n *node) (nodeReply, error) {
	req := a.req
	var cmd *redis.Cmd
	if i == 0 && a.r.opts.Wait == WaitQueue {
		// Never ahead of a waiter queued on the first node.
		cmd = redisproto.WaitScript.Run(ctx, n.c, a.ks.WaitKeys(), req.Owner, redisproto.Millis(req.TTL), a.hold, "", "c")
	} else {
		cmd = redisproto.AcquireScript.Run(ctx, n.c, []string{a.ks.Lock, a.ks.Fence}, req.Owner, redisproto.Millis(req.TTL), a.hold)
	}
	res, err := redisproto.AcquireReply(cmd, req.TTL)
	if err != nil {
		return nodeReply{node: i, unknown: true}, err
	}
	return nodeReply{AcquireResult: res, node: i}, nil
}

// lateReply handles a node's answer that came after the attempt stopped
// waiting for it.
func (a *attempt) lateReply(ctx context.Context, late nodeReply) {
	// The node answered after the attempt stopped waiting for
	// it. A grant is the attempt's hold like the others: it stays
	// for the lock's Release, unless the hold is being given back
	// already (Release or the failed attempt's cleanup started,
	// and may have reached the node before this script ran). A
	// call that failed may have run its script after that
	// release found nothing (the cleanup does not wait for a call
	// in flight): give the hold back now. A release of a hold the
	// node does not have changes nothing.
	if late.unknown || (late.Held && a.back.late()) {
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), redisproto.CleanupTimeout)
		defer cancel()
		_, _ = redisproto.ReleaseHold(rctx, a.r.nodes[late.node].c, a.ks, a.req.Owner, a.hold, "release")
	}
}

// conclude turns the final count v into the attempt's grant, fencing its
// token on a majority, or into its failure, giving its hold back.
func (a *attempt) conclude(ctx context.Context, v votes) (backend.Grant, error) {
	r, req := a.r, a.req
	held, refused, failed, retry := v.held, v.refused, v.failed, v.retry
	if refused > 0 {
		r.observe(req.Key)
	}
	if held < r.quorum {
		if refused > len(r.nodes)-r.quorum || failed == 0 {
			return a.fail(ctx, backend.NotAcquired(req.Key, retry))
		}
		return a.fail(ctx, fmt.Errorf("redlock: acquire %q: %w: %d of %d nodes granted, %d failed (need %d): %w",
			req.Key, r.failKind(a.errs), held, len(r.nodes), failed, r.quorum, errors.Join(a.errs...)))
	}
	token := newToken(a.res)
	if err := r.fence(ctx, a.ks, req, a.hold, token, a.res); err != nil {
		return a.fail(ctx, fmt.Errorf("redlock: acquire %q: %w", req.Key, err))
	}
	if elapsed := time.Since(a.first); elapsed >= req.TTL-driftOf(req) {
		return a.fail(ctx, fmt.Errorf("redlock: acquire %q: %w: a majority granted, but only after %v of the %v TTL", req.Key, backend.ErrUnavailable, elapsed, req.TTL))
	}
	l := &rlock{r: r, key: req.Key, ks: a.ks, owner: req.Owner, hold: a.hold, back: a.back}
	return backend.Grant{Lock: l, Token: token, ValidFrom: a.first}, nil
}

// fail gives the failed attempt's hold back and returns err.
func (a *attempt) fail(ctx context.Context, err error) (backend.Grant, error) {
	a.back.start()
	a.r.cleanup(ctx, a.ks, a.req.Owner, a.hold, a.res, a.errs)
	return backend.Grant{}, err
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
