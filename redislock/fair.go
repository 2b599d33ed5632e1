package redislock

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/distlock/distlock/backend"
	"github.com/distlock/distlock/internal/redisproto"
)

// Queue mode (WaitQueue, URL wait=queue, the default where supported):
// waiters queue in Redis, oldest first, and a release hands the lock
// straight to the oldest live waiter (redisproto.ReleaseScript's handOff): the lock is
// recorded held by that waiter's wait before the releaser's script ends, so
// no one can jump the queue. A message on the waiter's driver's own inbox
// channel (subscribed once per driver, so a release wakes one connection,
// not every waiter of the key) wakes the waiter, whose next attempt finds
// the lock held by its wait and confirms it: the grant is read from the
// lock's own state in Redis, never from the message, which anyone allowed
// to PUBLISH could forge. A hand-off thus costs the releaser's round trip,
// one pub/sub push and the waiter's confirming round trip. A waiter proves
// it is alive by re-running redisproto.WaitScript every redisproto.Heartbeat; one that stops
// (its process died) is skipped after its liveness window, and a lock
// handed to it expires after that window. A waiter that misses the message
// finds the lock handed to it at its next redisproto.Heartbeat (woken early when the
// pub/sub connection breaks).
//
// Validity: the confirming attempt extends the lock to the full TTL, so
// the grant is valid from that attempt's send time, as any acquisition.

// waitKind is errKind for a wait's failure: a wait whose ctx was canceled
// while its call was out (the call then fails, or the driver stops waiting
// for it) failed because of the cancellation, not an unreachable store, and
// says so; a deadline keeps the store's kind (a server that did not answer
// in time).
func waitKind(ctx context.Context, err error) error {
	if errors.Is(ctx.Err(), context.Canceled) {
		return context.Cause(ctx)
	}
	if errors.Is(err, backend.ErrUnavailable) {
		return backend.ErrUnavailable
	}
	return errKind(err)
}

// waitMutex implements backend.Waiter in queue mode. Every attempt of one Wait
// is the same hold (the wait's id), so a retried or repeated attempt
// confirms rather than counts again, and giving up gives back exactly what
// this wait may hold.
func (d *Driver) waitMutex(ctx context.Context, req backend.Request) (backend.Grant, error) {
	if err := ctx.Err(); err != nil {
		return backend.Grant{}, fmt.Errorf("redislock: wait %q: %w", req.Key, context.Cause(ctx))
	}
	ks := d.keys(req.Key)
	wait := redisproto.NewID()
	out := make(chan struct{}, 1)
	unsubscribe, err := d.notify.Subscribe(ctx, d.inbox, out, redisproto.Filter{Only: "h:" + wait})
	if err != nil {
		return backend.Grant{}, fmt.Errorf("redislock: wait %q: %w: %w", req.Key, waitKind(ctx, err), err)
	}
	defer unsubscribe()
	beat := redisproto.Heartbeat(req.TTL)
	window := 3 * beat
	// The timer is made when a first attempt did not take the lock: an
	// uncontended wait (one attempt) never touches the runtime's timers.
	var timer *time.Timer
	defer func() {
		if timer != nil {
			timer.Stop()
		}
	}()
	for attempt := 0; ; attempt++ {
		sent := time.Now()
		var res redisproto.AcquireResult
		var err error
		if !d.awaits(ctx) {
			res, err = d.fairAttempt(ctx, ks, req.Owner, req.TTL, true, window, wait, attempt)
		} else {
			ks := ks // captured: a copy made on this path only
			res, err = await(d, ctx, func() (redisproto.AcquireResult, error) {
				return d.fairAttempt(ctx, ks, req.Owner, req.TTL, true, window, wait, attempt)
			}, func(redisproto.AcquireResult, error) {
				// The caller stopped waiting: leave the queue, giving
				// back a lock the attempt may have confirmed.
				_ = d.abandon(context.Background(), ks, req.Owner, wait)
			}, redisproto.CleanupTimeout)
		}
		if err != nil && abandoned(err) {
			return backend.Grant{}, fmt.Errorf("redislock: wait %q: %w: %w (the wait left the queue, giving back what it held; if the call is still out, it does so when the call ends)", req.Key, waitKind(ctx, backend.ErrUnavailable), err)
		}
		if err != nil && redisproto.NotAllowed(err) && attempt == 0 {
			return backend.Grant{}, fmt.Errorf("redislock: wait %q: %w: %w", req.Key, backend.ErrInvalidConfig, err)
		}
		if err != nil {
			d.suspect(err)
			// The script may have taken or confirmed the lock for this
			// wait: give that back, and the place in the queue.
			aerr := d.abandon(ctx, ks, req.Owner, wait)
			return backend.Grant{}, fmt.Errorf("redislock: wait %q: %w: %w", req.Key, waitKind(ctx, err), redisproto.AlsoFailed(err, aerr))
		}
		if res.Held {
			l := &lock{d: d, key: req.Key, ks: ks, owner: req.Owner, hold: wait}
			return backend.Grant{Lock: l, Token: res.Token, ValidFrom: sent}, nil
		}
		delay := beat
		if res.PTTL > 0 && res.PTTL < delay {
			delay = res.PTTL + time.Millisecond
		}
		if timer == nil {
			timer = time.NewTimer(delay)
		} else {
			timer.Reset(delay)
		}
		select {
		case <-out:
			if !timer.Stop() {
				<-timer.C
			}
		case <-timer.C:
		case <-ctx.Done():
			aerr := d.abandon(ctx, ks, req.Owner, wait)
			return backend.Grant{}, fmt.Errorf("redislock: wait %q: %w", req.Key, errors.Join(context.Cause(ctx), aerr))
		}
	}
}

// fairAttempt runs redisproto.WaitScript: take, confirm a hand-off or (with enqueue)
// queue up as attempt number attempt of wait (the hold's id).
func (d *Driver) fairAttempt(ctx context.Context, ks redisproto.Keyset, owner string, ttl time.Duration, enqueue bool, window time.Duration, wait string, attempt int) (redisproto.AcquireResult, error) {
	if !enqueue {
		return redisproto.AcquireReply(redisproto.WaitScript.Run(ctx, d.c, ks.WaitKeys(), owner, redisproto.Millis(ttl), wait), ttl)
	}
	return redisproto.AcquireReply(redisproto.WaitScript.Run(ctx, d.c, ks.WaitKeys(), owner, redisproto.Millis(ttl), wait, redisproto.QueueEntry(window, attempt, d.inbox)), ttl)
}

// abandon takes a waiter that gives up out of the queue, giving back the
// hold of a lock handed to its wait, with its own short bound.
func (d *Driver) abandon(ctx context.Context, ks redisproto.Keyset, owner, wait string) error {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), redisproto.CleanupTimeout)
	defer cancel()
	if _, err := await(d, ctx, func() (int64, error) { return redisproto.ReleaseHold(ctx, d.c, ks, owner, wait, "abandon") }, nil, 0); err != nil {
		return fmt.Errorf("leaving the queue failed; the place expires within its liveness window: %w", err)
	}
	return nil
}
