package redlock

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/distlock/distlock/backend"
	"github.com/distlock/distlock/internal/redisproto"
)

// Redlock's queue mode (WaitQueue, the default): the first node is the
// admission order. A waiter queues on the first node exactly as on a single
// server (redisproto.WaitScript, heartbeats, liveness window), and a release on the
// first node hands it to the oldest live waiter there (redisproto.ReleaseScript's
// handOff), which is woken on its driver's inbox channel. Only the waiter
// holding the first node then takes the other nodes, all at once, with the
// same hold; it is granted, as any Redlock attempt, when a majority records
// its fencing token within the validity. The first node's grant is read
// from the lock's state on that node (a forged message grants nothing).
//
// Waiters that do not hold the first node take no other node, so they split
// no vote, and every hand-off goes to the oldest live waiter: the queue is
// fair. A TryAcquire never goes ahead of a waiter queued on the first node.
//
// When the first node fails (a subscription or a queue attempt errs), the
// wait falls back to notify mode for a while (raceWait): TryAcquire on every
// node, woken by release announcements, which a majority still grants; the
// next Wait queues again.

// Wait implements backend.Waiter in queue mode, for the mutex.
func (r *Driver) Wait(ctx context.Context, req backend.Request) (backend.Grant, error) {
	if req.Kind != backend.Exclusive {
		return backend.Grant{}, backend.UnsupportedKind("redlock", "wait", req.Kind)
	}
	if err := ctx.Err(); err != nil {
		return backend.Grant{}, fmt.Errorf("redlock: wait %q: %w", req.Key, context.Cause(ctx))
	}
	ks := r.keys(req.Key)
	wait := redisproto.NewID()
	out := make(chan struct{}, 1)
	unsubscribe, err := r.nodes[0].notify.Subscribe(ctx, r.inbox, out, redisproto.Filter{Only: "h:" + wait})
	if err != nil {
		if ctx.Err() != nil {
			return backend.Grant{}, fmt.Errorf("redlock: wait %q: %w", req.Key, context.Cause(ctx))
		}
		if redisproto.NotAllowed(err) {
			// The first node refused the login or the channel: no
			// retry fixes that.
			return backend.Grant{}, fmt.Errorf("redlock: wait %q: %w: the first node: %w", req.Key, backend.ErrInvalidConfig, err)
		}
		return r.raceWait(ctx, req)
	}
	defer unsubscribe()
	beat := redisproto.Heartbeat(req.TTL)
	window := 3 * beat
	timer := time.NewTimer(0)
	defer timer.Stop()
	<-timer.C
	// The first attempt asks every node at once, as TryAcquire, unless
	// this driver met another holder of the key lately: then the first
	// node alone first, so that a waiter that will queue takes no other
	// node. Later attempts ask every node at once only when woken by a
	// hand-off.
	_, busy := r.contended(req.Key)
	woken, tick := !busy, false
	for attempt := 0; ; attempt++ {
		g, pttl, err := r.queueAttempt(ctx, ks, req, wait, attempt, window, woken, tick)
		switch {
		case err == nil && g.Lock != nil:
			return g, nil
		case errors.Is(err, errFirstFailed):
			aerr := r.abandon(ctx, ks, req.Owner, wait)
			if ctx.Err() != nil {
				return backend.Grant{}, fmt.Errorf("redlock: wait %q: %w", req.Key, errors.Join(context.Cause(ctx), err, aerr))
			}
			unsubscribe()
			return r.raceWait(ctx, req)
		case err != nil:
			aerr := r.abandon(ctx, ks, req.Owner, wait)
			return backend.Grant{}, fmt.Errorf("redlock: wait %q: %w", req.Key, redisproto.AlsoFailed(err, aerr))
		}
		r.observe(req.Key)
		delay := beat
		if pttl > 0 && pttl < delay {
			delay = pttl + time.Millisecond
		}
		timer.Reset(delay)
		select {
		case <-out:
			woken, tick = true, false
			if !timer.Stop() {
				<-timer.C
			}
		case <-timer.C:
			woken, tick = false, true
		case <-ctx.Done():
			aerr := r.abandon(ctx, ks, req.Owner, wait)
			return backend.Grant{}, fmt.Errorf("redlock: wait %q: %w", req.Key, errors.Join(context.Cause(ctx), aerr))
		}
	}
}

// errFirstFailed: the first node did not answer a queue attempt.
var errFirstFailed = errors.New("the first node failed")

// queueAttempt is one attempt of wait (attempt number attempt): it runs
// redisproto.WaitScript on the first node, which grants the lock to the wait, or
// queues it (or keeps its place), and only if the first node granted takes
// the other nodes, as TryAcquire does. A waiter woken by a hand-off asks
// every node at once. It returns a grant (Lock set), or no grant and the
// holder's remaining TTL on the first node when the wait stays queued, or
// an error (errFirstFailed when the first node failed). A failed majority
// gives back everything it took, the first node included (handing it to
// the next waiter), and the wait queues again.
//
// A redisproto.Heartbeat attempt (tick) whose first node refuses asks the other nodes
// too, and takes a majority of them if they grant one: a lock left on the
// first node alone (a release that failed there) then delays the waiters
// by one redisproto.Heartbeat, not by its TTL. The wait then leaves the first node's
// queue.
func (r *Driver) queueAttempt(ctx context.Context, ks redisproto.Keyset, req backend.Request, wait string, attempt int, window time.Duration, woken, tick bool) (backend.Grant, time.Duration, error) {
	q := &waitAttempt{r: r, ks: ks, req: req, wait: wait, attempt: attempt, window: window, first: time.Now(),
		res: make([]redisproto.AcquireResult, len(r.nodes)), errs: make([]error, len(r.nodes))}
	res, errs := q.res, q.errs
	ask := func(only []int) { q.ask(ctx, only) }
	all := make([]int, len(r.nodes))
	for i := range all {
		all[i] = i
	}
	if woken {
		ask(all)
	} else {
		ask(all[:1])
		if errs[0] == nil && (res[0].Held || tick) {
			ask(all[1:])
		}
	}
	if errs[0] != nil {
		q.giveBackRest(ctx)
		return backend.Grant{}, 0, fmt.Errorf("%w: %w", errFirstFailed, errs[0])
	}
	around := false
	if !res[0].Held {
		others := 0
		for i := 1; i < len(r.nodes); i++ {
			if errs[i] == nil && res[i].Held {
				others++
			}
		}
		if !tick || others < r.quorum {
			if woken || tick {
				q.giveBackRest(ctx)
			}
			return backend.Grant{}, res[0].PTTL, nil
		}
		around = true
	}
	// The first node is this wait's: the other nodes' holder (the
	// previous one, whose release may still be on its way, or an attempt
	// that went around the queue) frees them soon or loses the first node
	// for good; ask the refusing nodes again for a while.
	v := r.askAgain(ctx, req.TTL, q.first, res, errs, ask, func() bool { return true })
	return q.conclude(ctx, v, around)
}

// waitAttempt is one queueAttempt: the wait's request and hold (wait),
// the attempt's number and liveness window, when it first asked, and each
// node's answer (res and errs, one entry per node).
type waitAttempt struct {
	r       *Driver
	ks      redisproto.Keyset
	req     backend.Request
	wait    string
	attempt int
	window  time.Duration
	first   time.Time
	res     []redisproto.AcquireResult
	errs    []error
}

// waitReply is one node's answer to a queue attempt.
type waitReply struct {
	redisproto.AcquireResult
	node int
}

// ask sends the attempt to the nodes in only and records their answers
// in res and errs.
func (q *waitAttempt) ask(ctx context.Context, only []int) {
	rs, es := someNodes(q.r, ctx, nodeTimeout(q.req.TTL, len(q.r.nodes)), only, q.call, func(late waitReply) { q.lateReply(ctx, late) })
	for _, i := range only {
		q.res[i], q.errs[i] = rs[i].AcquireResult, es[i]
	}
}

// call runs the attempt's script on node n (index i): the queue-aware one
// on the first node, the plain acquire on the others.
func (q *waitAttempt) call(ctx context.Context, i int, n *node) (waitReply, error) {
	req, ks := q.req, q.ks
	var cmd *redis.Cmd
	if i == 0 {
		cmd = redisproto.WaitScript.Run(ctx, n.c, ks.WaitKeys(), req.Owner, redisproto.Millis(req.TTL), q.wait, redisproto.QueueEntry(q.window, q.attempt, q.r.inbox), "c")
	} else {
		cmd = redisproto.AcquireScript.Run(ctx, n.c, []string{ks.Lock, ks.Fence}, req.Owner, redisproto.Millis(req.TTL), q.wait)
	}
	a, err := redisproto.AcquireReply(cmd, req.TTL)
	if err != nil {
		return waitReply{node: i}, err
	}
	return waitReply{a, i}, nil
}

// lateReply handles a node's answer that came after the attempt stopped
// waiting for it.
func (q *waitAttempt) lateReply(ctx context.Context, late waitReply) {
	// A node answered after the attempt stopped waiting for it
	// (the wait then gives up, or falls back when it was the first
	// node, and has already abandoned): give back what it granted,
	// and on the first node the place it may have queued.
	mode := "abandon"
	if late.node > 0 {
		if !late.Held {
			return
		}
		mode = "quiet"
	}
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), redisproto.CleanupTimeout)
	defer cancel()
	_, _ = redisproto.ReleaseHold(rctx, q.r.nodes[late.node].c, q.ks, q.req.Owner, q.wait, mode)
}

// giveBackRest releases what the other nodes granted, quietly: the
// wait keeps its place (or its hold) on the first node.
func (q *waitAttempt) giveBackRest(ctx context.Context) {
	eachNode(q.r, context.WithoutCancel(ctx), redisproto.CleanupTimeout, func(ctx context.Context, i int, n *node) (struct{}, error) {
		if i > 0 && (q.res[i].Held || q.errs[i] != nil) {
			_, err := redisproto.ReleaseHold(ctx, n.c, q.ks, q.req.Owner, q.wait, "quiet")
			return struct{}{}, err
		}
		return struct{}{}, nil
	})
}

// conclude turns the final count v of an attempt that holds the first
// node (or, around, a majority without it) into its grant, fencing its
// token on a majority, or into its failure, giving everything back.
func (q *waitAttempt) conclude(ctx context.Context, v votes, around bool) (backend.Grant, time.Duration, error) {
	r, req, ks, wait, res, errs := q.r, q.req, q.ks, q.wait, q.res, q.errs
	held, refused, failed := v.held, v.refused, v.failed
	fail := func(err error) (backend.Grant, time.Duration, error) {
		// Give back every node, the first one included: a release there
		// hands the lock to the next waiter. The wait's place is gone;
		// it queues again with its next attempt.
		r.cleanup(ctx, ks, req.Owner, wait, res, errs)
		return backend.Grant{}, 0, err
	}
	if held < r.quorum {
		if failed > 0 && held+refused < r.quorum {
			return fail(fmt.Errorf("%w: %d of %d nodes granted, %d failed (need %d): %w",
				r.failKind(errs), held, len(r.nodes), failed, r.quorum, errors.Join(errs...)))
		}
		if ctx.Err() != nil {
			return fail(context.Cause(ctx))
		}
		g, _, _ := fail(nil)
		return g, time.Millisecond, nil // queue again soon
	}
	token := newToken(res)
	if err := r.fence(ctx, ks, req, wait, token, res); err != nil {
		return fail(err)
	}
	if elapsed := time.Since(q.first); elapsed >= req.TTL-driftOf(req) {
		return fail(fmt.Errorf("%w: a majority granted, but only after %v of the %v TTL", backend.ErrUnavailable, elapsed, req.TTL))
	}
	if around {
		// Granted without the first node: leave its queue (and give back
		// a lock handed to this wait there meanwhile).
		actx, cancel := context.WithTimeout(context.WithoutCancel(ctx), redisproto.CleanupTimeout)
		_, _ = redisproto.ReleaseHold(actx, r.nodes[0].c, ks, req.Owner, wait, "abandon")
		cancel()
	}
	l := &rlock{r: r, key: req.Key, ks: ks, owner: req.Owner, hold: wait, back: &giveBack{}}
	return backend.Grant{Lock: l, Token: token, ValidFrom: q.first}, 0, nil
}

// abandon gives back everything wait may hold or have queued, on every
// node, with its own short bound: its place in the first node's queue and
// a lock handed to it there (which goes to the next waiter), and its hold
// on the other nodes.
func (r *Driver) abandon(ctx context.Context, ks redisproto.Keyset, owner, wait string) error {
	_, errs := eachNode(r, context.WithoutCancel(ctx), redisproto.CleanupTimeout, func(ctx context.Context, i int, n *node) (struct{}, error) {
		mode := "quiet"
		if i == 0 {
			mode = "abandon"
		}
		_, err := redisproto.ReleaseHold(ctx, n.c, ks, owner, wait, mode)
		return struct{}{}, err
	})
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("leaving the queue failed on some node; what the wait held there expires with its TTL or liveness window: %w", err)
	}
	return nil
}

// raceMax bounds a wait in notify mode after the first node failed: then
// Wait returns ErrUnavailable and the portable layer waits again, queueing
// if the first node is back.
const raceMax = 5 * time.Second

// raceWait is notify mode for one wait whose first node failed: TryAcquire
// (which a majority of the other nodes can grant), woken by the release
// announcements of every node, or at the holder's TTL.
func (r *Driver) raceWait(ctx context.Context, req backend.Request) (backend.Grant, error) {
	var wake <-chan struct{}
	unsubscribe := func() {}
	defer func() { unsubscribe() }()
	start := time.Now()
	for {
		sent := time.Now()
		g, err := r.TryAcquire(ctx, req)
		if err == nil {
			if g.ValidFrom.IsZero() {
				g.ValidFrom = sent
			}
			return g, nil
		}
		if ctx.Err() != nil || !errors.Is(err, backend.ErrNotAcquired) {
			return g, err
		}
		if wake == nil {
			if w, cancel, serr := r.Subscribe(ctx, req.Key, backend.Exclusive); serr == nil {
				wake, unsubscribe = w, cancel
				continue // a release before the subscription was not announced
			}
		}
		left := raceMax - time.Since(start)
		if left <= 0 {
			return backend.Grant{}, fmt.Errorf("redlock: wait %q: %w: the first node failed; waited %v in notify mode, queueing again", req.Key, backend.ErrUnavailable, raceMax)
		}
		delay := min(left, time.Second)
		if ra := backend.RetryAfter(err); ra > 0 && ra < delay {
			delay = ra + time.Millisecond
		}
		t := time.NewTimer(delay)
		select {
		case <-t.C:
		case <-wake:
			t.Stop()
		case <-ctx.Done():
			t.Stop()
			return backend.Grant{}, fmt.Errorf("redlock: wait %q: %w", req.Key, context.Cause(ctx))
		}
	}
}
