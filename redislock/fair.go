package redislock

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/distlock/distlock/backend"
)

// Queue mode (WaitQueue, URL wait=queue, the default where supported):
// waiters queue in Redis, oldest
// first, and a release hands the lock straight to the oldest live waiter
// (releaseScript's handOff). The hand-off message names the wait it was
// handed to and carries the token: it is the grant, so a hand-off costs the
// releaser's one round trip and one pub/sub push, and the new holder none.
// Hand-offs go to the waiter's driver's own inbox channel, subscribed
// once per driver, so a release wakes one connection, not every waiter of
// the key. A waiter proves it is alive by re-running waitScript every heartbeat; one
// that stops (its process died) is skipped after its liveness window, and a
// lock handed to it expires after that window. A waiter that misses the
// message finds the lock handed to it at its next attempt (woken early when
// the pub/sub connection breaks).
//
// Validity of a grant by message: the hand-off ran after the waiter's
// attempt that the message names (that attempt wrote the queue entry the
// hand-off read) and set the lock's TTL to min(TTL, window). So the lock
// lives at least until that attempt's send time + min(TTL, window), in the
// waiter's clock, minus drift; the Grant states exactly that (TTL = the
// handed life), and renewals, the first due after a third of that life,
// extend it to the full TTL.

// heartbeat is how often a fair waiter renews its place for a lease of
// ttl; its liveness window is three heartbeats.
func heartbeat(ttl time.Duration) time.Duration {
	return min(max(ttl/3, 50*time.Millisecond), time.Second)
}

// recentAttempts is how many of a wait's latest attempts a hand-off message
// may name and still be taken as the grant; older ones are confirmed by a
// round trip instead.
const recentAttempts = 16

// Wait implements backend.Waiter in queue mode.
func (d *Driver) Wait(ctx context.Context, req backend.Request) (backend.Grant, error) {
	ks := d.keys(req.Key)
	wait := newWaitID()
	out := make(chan struct{}, 1)
	handed := make(chan string, 4)
	unsubscribe, err := d.notify.subscribe(ctx, d.inbox, out, filter{
		only: "h:" + wait + ":",
		got: func(payload string) {
			select {
			case handed <- payload:
			default: // the next attempt confirms the hand-off instead
			}
		},
	})
	if err != nil {
		kind := backend.ErrUnavailable
		if notAllowed(err) {
			kind = backend.ErrInvalidConfig
		}
		return backend.Grant{}, fmt.Errorf("redislock: wait %q: %w: %w", req.Key, kind, err)
	}
	defer unsubscribe()
	beat := heartbeat(req.TTL)
	window := 3 * beat
	var sent [recentAttempts]time.Time // send time of attempt n at n%recentAttempts
	attempts := 0
	timer := time.NewTimer(0)
	defer timer.Stop()
	<-timer.C
	for {
		n := attempts
		attempts++
		sent[n%recentAttempts] = time.Now()
		res, err := d.fairAttempt(ctx, ks, req.Owner, req.TTL, true, window, wait, n)
		if err != nil && notAllowed(err) && n == 0 {
			return backend.Grant{}, fmt.Errorf("redislock: wait %q: %w: %w", req.Key, backend.ErrInvalidConfig, err)
		}
		if err != nil {
			d.suspect(err)
			// The script may have taken or confirmed the lock: give back
			// both a hand-off and a hold.
			aerr := errors.Join(d.abandon(ctx, ks, req.Owner, wait), d.cleanup(ctx, ks, req.Owner))
			return backend.Grant{}, fmt.Errorf("redislock: wait %q: %w: %w", req.Key, backend.ErrUnavailable, errors.Join(err, aerr))
		}
		if res.held {
			l := &lock{d: d, key: req.Key, ks: ks, owner: req.Owner}
			return backend.Grant{Lock: l, Token: res.token, ValidFrom: sent[n%recentAttempts]}, nil
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
			aerr := d.abandon(ctx, ks, req.Owner, wait)
			return backend.Grant{}, fmt.Errorf("redislock: wait %q: %w", req.Key, errors.Join(context.Cause(ctx), aerr))
		}
		select {
		case payload := <-handed:
			a, token, ok := parseHandOff(payload)
			if !ok || a >= attempts || a < attempts-recentAttempts {
				continue
			}
			from := sent[a%recentAttempts]
			life := min(req.TTL, window)
			if time.Since(from) > life/2 {
				continue // a late message: confirm with a round trip
			}
			l := &lock{d: d, key: req.Key, ks: ks, owner: req.Owner}
			return backend.Grant{Lock: l, Token: token, TTL: life, ValidFrom: from}, nil
		default:
		}
	}
}

// parseHandOff reads "h:<wait>:<attempt>:<token>".
func parseHandOff(payload string) (attempt int, token uint64, ok bool) {
	parts := strings.Split(payload, ":")
	if len(parts) != 4 || parts[0] != "h" {
		return 0, 0, false
	}
	a, err1 := strconv.Atoi(parts[2])
	t, err2 := strconv.ParseUint(parts[3], 10, 64)
	if err1 != nil || err2 != nil || a < 0 || t == 0 {
		return 0, 0, false
	}
	return a, t, true
}

// newWaitID names one wait: 16 hex digits, unique with overwhelming
// probability.
func newWaitID() string {
	var b [8]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails
	return hex.EncodeToString(b[:])
}

// fairAttempt runs waitScript: take, confirm a hand-off or (with enqueue)
// queue up as attempt number attempt of wait.
func (d *Driver) fairAttempt(ctx context.Context, ks keyset, owner string, ttl time.Duration, enqueue bool, window time.Duration, wait string, attempt int) (acquireResult, error) {
	flag := "0"
	if enqueue {
		flag = "1"
	}
	v, err := waitScript.Run(ctx, d.c, ks.waitKeys(), owner, millis(ttl), flag, millis(window), wait, attempt, d.inbox).Int64Slice()
	if err != nil {
		return acquireResult{}, err
	}
	return parseAcquire(v)
}

// abandon takes a waiter that gives up out of the queue, giving back the
// hold of a lock handed to its wait, with its own short bound.
func (d *Driver) abandon(ctx context.Context, ks keyset, owner, wait string) error {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), cleanupTimeout)
	defer cancel()
	if err := releaseScript.Run(ctx, d.c, ks.releaseKeys(), owner, ks.channel, "abandon", wait).Err(); err != nil {
		return fmt.Errorf("leaving the queue failed; the place expires within its liveness window: %w", err)
	}
	return nil
}
