package redislock

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/distlock/distlock/backend"
)

// Fair mode (Options.Fair, URL wait=queue): waiters queue in Redis, oldest
// first, and a release hands the lock straight to the oldest live waiter
// (releaseScript's handOff), which is woken by a message naming it: one
// wake-up and one round trip per hand-off instead of every waiter racing
// for the lock. A waiter proves it is alive by re-running waitScript every
// heartbeat; one that stops (its process died) is skipped after its
// liveness window, and a lock handed to it expires after that window.

// heartbeat is how often a fair waiter renews its place for a lease of
// ttl; its liveness window is three heartbeats.
func heartbeat(ttl time.Duration) time.Duration {
	return min(max(ttl/3, 50*time.Millisecond), time.Second)
}

// Wait implements backend.Waiter in fair mode.
func (d *Driver) Wait(ctx context.Context, req backend.Request) (backend.Grant, error) {
	ks := d.keys(req.Key)
	out := make(chan struct{}, 1)
	unsubscribe, err := d.notify.subscribe(ctx, ks.channel, out, req.Owner)
	if err != nil {
		return backend.Grant{}, fmt.Errorf("redislock: wait %q: %w: %w", req.Key, backend.ErrUnavailable, err)
	}
	defer unsubscribe()
	beat := heartbeat(req.TTL)
	timer := time.NewTimer(0)
	defer timer.Stop()
	<-timer.C
	for {
		sent := time.Now()
		res, err := d.fairAttempt(ctx, ks, req.Owner, req.TTL, true, 3*beat)
		if err != nil {
			// The script may have taken or claimed the lock: give back
			// both a hand-off and a hold.
			aerr := errors.Join(d.abandon(ctx, ks, req.Owner), d.cleanup(ctx, ks, req.Owner))
			return backend.Grant{}, fmt.Errorf("redislock: wait %q: %w: %w", req.Key, backend.ErrUnavailable, errors.Join(err, aerr))
		}
		if res.held {
			l := &lock{d: d, key: req.Key, ks: ks, owner: req.Owner}
			return backend.Grant{Lock: l, Token: res.token, ValidFrom: sent}, nil
		}
		delay := beat
		if res.pttl > 0 && res.pttl < delay {
			delay = res.pttl + time.Millisecond
		}
		timer.Reset(delay)
		select {
		case <-out:
			if !timer.Stop() {
				<-timer.C
			}
		case <-timer.C:
		case <-ctx.Done():
			aerr := d.abandon(ctx, ks, req.Owner)
			return backend.Grant{}, fmt.Errorf("redislock: wait %q: %w", req.Key, errors.Join(context.Cause(ctx), aerr))
		}
	}
}

// fairAttempt runs waitScript: take, claim or (with enqueue) queue up.
func (d *Driver) fairAttempt(ctx context.Context, ks keyset, owner string, ttl time.Duration, enqueue bool, window time.Duration) (acquireResult, error) {
	flag := "0"
	if enqueue {
		flag = "1"
	}
	v, err := waitScript.Run(ctx, d.c, ks.waitKeys(), owner, millis(ttl), flag, millis(window)).Int64Slice()
	if err != nil {
		return acquireResult{}, err
	}
	return parseAcquire(v)
}

// abandon takes a waiter that gives up out of the queue, passing on a lock
// handed to it but not claimed, with its own short bound.
func (d *Driver) abandon(ctx context.Context, ks keyset, owner string) error {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), cleanupTimeout)
	defer cancel()
	if err := releaseScript.Run(ctx, d.c, ks.releaseKeys(), owner, ks.channel, "abandon").Err(); err != nil {
		return fmt.Errorf("leaving the queue failed; the place expires within its liveness window: %w", err)
	}
	return nil
}
