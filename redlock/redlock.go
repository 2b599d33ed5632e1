package redlock

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/distlock/distlock/backend"
	"github.com/distlock/distlock/internal/backoff"
	"github.com/distlock/distlock/internal/redisproto"
)

// Driver is a backend.Driver over N independent Redis primaries (the
// Redlock algorithm): a lock is held when a majority (N/2+1) of them granted
// it within its TTL, and fencing tokens come from a majority too (see
// docs/redis.md for the argument and its limits). It implements
// backend.Notifier, backend.Batcher and, in queue mode (the
// default), backend.Waiter: waiters queue on the first node (see Wait). It
// is safe for concurrent use.
type Driver struct {
	nodes  []*node
	all    []int // every node's index
	quorum int
	inbox  string // queue mode: the channel on the first node hand-offs to this driver's waiters go to
	owned  bool
	opts   Options
	caps   backend.Capabilities

	// bg counts the node-call workers (goNode), which run calls on after
	// their caller stopped waiting, too. A worker starts only under bgMu
	// while closing is unset, and Close sets closing under bgMu before it
	// waits: no worker starts (bg.Add from zero) concurrently with that
	// Wait.
	bgMu    sync.Mutex
	closing bool
	bg      sync.WaitGroup
	// Node calls run on worker goroutines that outlive a call (see
	// goNode): tasks hands a call to an idle worker, quit (closed by
	// Close) ends the idle ones. Each worker is counted in bg.
	tasks chan func()
	quit  chan struct{}

	busyMu sync.Mutex
	busy   map[string]busyKey // keys whose attempts met another holder lately

	closeOnce sync.Once
	closeErr  error
}

// node is one Redis primary of a Redlock.
type node struct {
	c      redis.UniversalClient
	notify *redisproto.Notifier
}

var (
	_ backend.Driver   = (*Driver)(nil)
	_ backend.Notifier = (*Driver)(nil)
	_ backend.Batcher  = (*Driver)(nil)
)

// Redlock timing, as in the Redlock description: the clock-drift margin is
// 1% of the TTL plus 2ms; each node gets a fraction of the TTL to answer, so
// one unresponsive node cannot eat the whole validity.
const (
	driftFactor  = 0.01
	driftFixed   = 2 * time.Millisecond
	minNodeWait  = 50 * time.Millisecond
	nodeWaitFrac = 3
)

// New returns a Redlock driver over clients, one per independent
// primary (at least 1; 3 or 5 in practice). The driver never closes them.
// Options.Wait defaults to WaitQueue: waiters queue on the first node (see Wait).
//
// Each node call is bounded by the caller's ctx and the node's share of
// the TTL whatever the client does (see eachNode); what the clients need
// is what redislock.New says of its client, and New logs redislock.New's
// warning (Options.Logger, else slog.Default()) for each client that does
// not end calls at their ctx's deadline, with the node's index.
func New(clients []redis.UniversalClient, opts *Options) (*Driver, error) {
	if len(clients) == 0 {
		return nil, fmt.Errorf("redlock: %w: Redlock needs at least one client", backend.ErrInvalidConfig)
	}
	o, err := opts.normalize()
	if err != nil {
		return nil, err
	}
	r := &Driver{quorum: len(clients)/2 + 1, opts: o, busy: map[string]busyKey{}, inbox: o.Prefix + ":inbox:" + redisproto.NewID(),
		tasks: make(chan func()), quit: make(chan struct{})}
	for _, c := range clients {
		if c == nil {
			return nil, fmt.Errorf("redlock: %w: nil client", backend.ErrInvalidConfig)
		}
		r.all = append(r.all, len(r.nodes))
		r.nodes = append(r.nodes, &node{c: c, notify: redisproto.NewNotifier(c)})
	}
	lg := o.Logger
	if lg == nil {
		lg = slog.Default()
	}
	for i, c := range clients {
		redisproto.BoundsOf(c).Warn(lg.With("node", i), "redlock")
	}
	r.caps = backend.Capabilities{
		Name:                "redlock",
		Server:              redisproto.ServerOf(clients[0]), // the first node
		Wait:                backend.WaitNotify,
		Fair:                o.Wait == WaitQueue,
		Lifetime:            backend.LifetimeTTL,
		PerLockTTL:          true,
		MinTTL:              redisproto.MinTTL,
		MaxTTL:              redisproto.MaxTTL,
		CrossProcessReentry: true,
		Replication:         fmt.Sprintf("Redlock: majority (%d of %d) of independent primaries", r.quorum, len(clients)),
		BatchRefresh:        true, // redlock_lock.go
		ForceRelease:        true, // force.go
	}
	if o.Wait == WaitQueue {
		r.caps.Wait = backend.WaitQueue
	}
	return r, nil
}

// Capabilities implements backend.Driver.
func (r *Driver) Capabilities() backend.Capabilities { return r.caps }

// Close stops the pub/sub connections and closes the clients if the driver
// opened them from a URL. It returns once every node call already started
// has ended; a call that would start after it fails with ErrClosed.
func (r *Driver) Close() error {
	r.closeOnce.Do(func() {
		r.bgMu.Lock()
		r.closing = true
		close(r.quit)
		r.bgMu.Unlock()
		var errs []error
		for _, n := range r.nodes {
			errs = append(errs, n.notify.Close())
			if r.owned {
				errs = append(errs, redisproto.IgnoreClosed(n.c.Close()))
			}
		}
		r.bg.Wait()
		r.closeErr = errors.Join(errs...)
	})
	return r.closeErr
}

func (r *Driver) keys(key string) redisproto.Keyset { return redisproto.KeysFor(r.opts.Prefix, key) }

// nodeTimeout is how long one of n nodes may take to answer for a lock of
// ttl: together they may use a third of it.
func nodeTimeout(ttl time.Duration, n int) time.Duration {
	return max(ttl/time.Duration(nodeWaitFrac*n), minNodeWait)
}

// eachNode runs fn on every node concurrently and returns each node's
// result, waiting at most timeout: a go-redis client without
// ContextTimeoutEnabled ignores ctx deadlines and waits its ReadTimeout, and
// one slow node must not hold up the quorum. A node that has not answered
// by then gets an error; its call finishes in the background (Close waits
// for it) and its result goes to late, if not nil, else is dropped.
func eachNode[T any](r *Driver, ctx context.Context, timeout time.Duration, fn func(ctx context.Context, i int, n *node) (T, error), late ...func(T)) ([]T, []error) {
	return someNodes(r, ctx, timeout, nil, fn, late...)
}

// someNodes is eachNode on the nodes whose index is in only (every node if
// only is nil); the others get zero results.
func someNodes[T any](r *Driver, ctx context.Context, timeout time.Duration, only []int, fn func(ctx context.Context, i int, n *node) (T, error), late ...func(T)) ([]T, []error) {
	return nodesUntil(r, ctx, timeout, only, fn, nil, late...)
}

// errNotAwaited is the error of a node the call stopped waiting for
// because the answers before it decided the outcome (nodesUntil's
// decided).
var errNotAwaited = errors.New("not awaited: the other nodes' answers decided")

// nodesUntil is someNodes that, when decided is not nil, calls it with
// each answer as it comes and stops waiting once it returns true: the
// nodes still running get errNotAwaited, and their results go to late as
// for a node that did not answer in time.
func nodesUntil[T any](r *Driver, ctx context.Context, timeout time.Duration, only []int, fn func(ctx context.Context, i int, n *node) (T, error), decided func(i int, v T, err error) bool, late ...func(T)) ([]T, []error) {
	if only == nil {
		only = r.all
	}
	vals := make([]T, len(r.nodes))
	errs := make([]error, len(r.nodes))
	if len(only) == 0 {
		return vals, errs
	}
	// The calls' context ends at the caller's deadline or after timeout,
	// and when the caller stops waiting because ctx ended or the time is
	// up; not when it stops because the answers so far decided (early):
	// the calls it did not wait for run on (their late answers count),
	// and the last to answer ends it.
	deadline := time.Now().Add(timeout)
	if d, ok := ctx.Deadline(); ok && d.Before(deadline) {
		deadline = d
	}
	cctx, cancel := context.WithDeadline(context.WithoutCancel(ctx), deadline)
	if ctx.Err() != nil {
		cancel() // as the old calls on ctx: a call on an ended context sends nothing
	}
	// The calls record their answers under mu; the one that completes
	// the set, or decides the outcome, wakes the caller (done): one
	// wake-up per round, not one per node. Once the caller stopped
	// waiting (gaveUp), answers go to late instead.
	var mu sync.Mutex
	gaveUp, early := false, false
	pending, running := len(only), len(only)
	done := make(chan struct{})
	answered := make([]bool, len(r.nodes))
	answer := func(i int, v T, err error) {
		mu.Lock()
		defer mu.Unlock()
		if running--; running == 0 {
			cancel()
		}
		if gaveUp {
			for _, f := range late {
				f(v)
			}
			return
		}
		vals[i], errs[i], answered[i] = v, err, true
		pending--
		if pending == 0 || (decided != nil && decided(i, v, err)) {
			early = pending > 0
			gaveUp = true
			close(done)
		}
	}
	r.bgMu.Lock()
	for _, i := range only {
		if r.closing {
			var zero T
			answer(i, zero, errClosed)
			continue
		}
		n := r.nodes[i]
		r.goNode(func() {
			v, err := fn(cctx, i, n)
			answer(i, v, err)
		})
	}
	r.bgMu.Unlock()
	select {
	case <-done:
	case <-cctx.Done():
	case <-ctx.Done():
	}
	mu.Lock()
	gaveUp = true
	if !early {
		cancel()
	}
	cause := context.Cause(ctx)
	if cause == nil {
		cause = context.Cause(cctx)
	}
	for _, i := range only {
		if !answered[i] {
			if early {
				errs[i] = fmt.Errorf("node %d: %w", i, errNotAwaited)
			} else {
				errs[i] = fmt.Errorf("node %d: no answer within %v: %w", i, timeout, cause)
			}
		}
	}
	mu.Unlock()
	return vals, errs
}

// workerIdle is how long a node-call worker waits for the next call
// before it ends.
const workerIdle = 5 * time.Second

// goNode runs the node call f on a worker goroutine: an idle one if there
// is one, else a new one, which then waits workerIdle for more calls. A
// goroutine started for each call would grow its stack through go-redis's
// call depth every time (copied 2 → 4 → 8 → 16 KB and more): about a
// fifth of the client's CPU in a Redlock pair; TestRedlockNodeCallWorkers). r.bgMu
// is held and closing unset, so no worker starts while Close waits.
func (r *Driver) goNode(f func()) {
	select {
	case r.tasks <- f:
	default:
		r.bg.Go(func() { r.work(f) })
	}
}

// work runs f, then the calls handed to it, until it has been idle for
// workerIdle or the driver closes.
func (r *Driver) work(f func()) {
	idle := time.NewTimer(workerIdle)
	defer idle.Stop()
	for {
		f()
		idle.Reset(workerIdle)
		select {
		case f = <-r.tasks:
		case <-idle.C:
			return
		case <-r.quit:
			return
		}
	}
}

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

// splitWait bounds how long, from its first request, an attempt holding
// the first node of a split vote asks the refusing nodes again: the other
// attempts of the split free them within a round trip or two; a lock held
// by a majority that lacks that node keeps refusing, and the attempt then
// gives up. A quarter of the TTL at most, so the grant keeps most of its
// validity, and 200 ms.
func splitWait(ttl time.Duration) time.Duration { return min(ttl/4, 200*time.Millisecond) }

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

// contendedFor is how long after an attempt on a key met another holder the
// driver asks the first node alone first (see TryAcquire).
const contendedFor = time.Second

// maxContended bounds the keys the driver remembers as contended.
const maxContended = 4096

// contended reports whether an attempt on key met another holder lately,
// and how long to yield to waiters before asking if this driver released
// the key just now.
func (r *Driver) contended(key string) (yield time.Duration, busy bool) {
	r.busyMu.Lock()
	defer r.busyMu.Unlock()
	b, ok := r.busy[key]
	if !ok || time.Since(b.refused) >= contendedFor {
		return 0, false
	}
	if since := time.Since(b.released); since < b.yield {
		yield = b.yield - since
	}
	return yield, true
}

// released records that a release of key took took, if the key is
// contended: the driver's next attempt yields to the waiters it woke for
// twice that (at most maxYield), their time to hear it and ask.
func (r *Driver) released(key string, took time.Duration) {
	r.busyMu.Lock()
	defer r.busyMu.Unlock()
	if b, ok := r.busy[key]; ok && time.Since(b.refused) < contendedFor {
		b.released, b.yield = time.Now(), min(2*took, maxYield)
		r.busy[key] = b
	}
}

// maxYield bounds a releasing driver's yield to the waiters of a key.
const maxYield = 5 * time.Millisecond

// busyKey is what a Redlock driver remembers of a contended key.
type busyKey struct {
	refused  time.Time     // an attempt met another holder
	released time.Time     // this driver released it
	yield    time.Duration // how long after released the driver yields
}

// observe records that an attempt on key met another holder.
func (r *Driver) observe(key string) {
	r.busyMu.Lock()
	defer r.busyMu.Unlock()
	if len(r.busy) >= maxContended {
		clear(r.busy)
	}
	b := r.busy[key]
	b.refused = time.Now()
	r.busy[key] = b
}

// sleepCtx sleeps d or until ctx ends.
func sleepCtx(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return context.Cause(ctx)
	}
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

// Subscribe implements backend.Notifier for the mutex (Redlock has no
// other kind): it subscribes on every node (each node's one shared pub/sub
// connection) and succeeds when at least one confirmed; a release is
// announced on every node that freed the lock.
func (r *Driver) Subscribe(ctx context.Context, key string, kind backend.Kind) (<-chan struct{}, func(), error) {
	if kind != backend.Exclusive {
		return nil, nil, backend.UnsupportedKind("redlock", "subscribe", kind)
	}
	ch := r.keys(key).Channel
	out := make(chan struct{}, 1)
	cancels, errs := eachNode(r, ctx, time.Second, func(ctx context.Context, _ int, n *node) (func(), error) {
		return n.notify.Subscribe(ctx, ch, out, redisproto.Filter{})
	}, func(cancel func()) {
		if cancel != nil {
			cancel() // confirmed too late to be counted
		}
	})
	cancel := func() {
		for _, c := range cancels {
			if c != nil {
				c()
			}
		}
	}
	for _, c := range cancels {
		if c != nil {
			return out, cancel, nil
		}
	}
	return nil, nil, fmt.Errorf("redlock: subscribe %q: %w: no node confirmed: %w", key, backend.ErrUnavailable, errors.Join(errs...))
}

// Withdraw implements backend.Notifier: Redlock grants no Write, so its
// attempts leave no writer-waiting mark to remove.
func (r *Driver) Withdraw(context.Context, backend.Request) error { return nil }

// votes counts the nodes' answers to one attempt.
type votes struct {
	held, refused, failed int
	retry                 time.Duration // the shortest time a refusing node's lock has left
}

// countVotes counts res and errs, one entry per node.
func countVotes(res []redisproto.AcquireResult, errs []error) votes {
	var v votes
	for i := range res {
		switch {
		case errs[i] != nil:
			v.failed++
		case res[i].Held:
			v.held++
		default:
			v.refused++
			if v.retry == 0 || res[i].PTTL < v.retry {
				v.retry = res[i].PTTL
			}
		}
	}
	return v
}

// split reports whether the nodes that answered could still make a
// quorum that the grants so far do not: a split vote, or a lock about to
// be freed.
func (v votes) split(quorum int) bool { return v.held < quorum && v.held+v.refused >= quorum }

// askAgain asks the nodes that refused the attempt again, with a jittered
// pause doubling from 100 µs to 5 ms, while mine() holds and the vote is
// split, for at most splitWait(ttl) since first or until ctx ends; ask
// sends the attempt to the given nodes and records their answers in res
// and errs. It returns the final count.
func (r *Driver) askAgain(ctx context.Context, ttl time.Duration, first time.Time, res []redisproto.AcquireResult, errs []error, ask func(only []int), mine func() bool) votes {
	v := countVotes(res, errs)
	budget := splitWait(ttl)
	const pauseMin, pauseMax = 100 * time.Microsecond, 5 * time.Millisecond
	var bo backoff.Backoff
	pause := bo.Next(pauseMin, pauseMax)
	for v.split(r.quorum) && mine() && time.Since(first)+pause < budget && ctx.Err() == nil {
		if sleepCtx(ctx, pause) != nil {
			break
		}
		pause = bo.Next(pauseMin, pauseMax)
		var again []int
		for i := range res {
			if errs[i] == nil && !res[i].Held {
				again = append(again, i)
			}
		}
		ask(again)
		v = countVotes(res, errs)
	}
	return v
}
