package main

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/spf13/cobra"

	"github.com/distlock/distlock"
)

// lockOpts are the flags of the subcommands that take a lock (run, hold).
type lockOpts struct {
	url, key    string
	owner       string // --owner; empty: defaultOwner()
	ttl, wait   time.Duration
	noWait      bool
	openTimeout time.Duration
}

// addLockFlags adds --url, --key, --owner, --ttl, --wait, --no-wait and
// --connect-timeout to cmd.
func addLockFlags(cmd *cobra.Command, o *lockOpts) {
	urlFlag(cmd, &o.url)
	cmd.Flags().StringVar(&o.key, "key", "", "lock key (required)")
	cmd.Flags().StringVar(&o.owner, "owner", "", "owner id to acquire as, 1 to 128 printable ASCII bytes without spaces (default HOST:PID:RANDOM, which status and list show); processes given the same id re-enter each other's lock where the store supports it")
	cmd.Flags().DurationVar(&o.ttl, "ttl", 0, "lease TTL: how long the lock outlives a crashed distlock (default: the URL's ttl, else 30s)")
	cmd.Flags().DurationVar(&o.wait, "wait", 0, "give up after waiting this long for the lock (default: wait indefinitely)")
	cmd.Flags().BoolVar(&o.noWait, "no-wait", false, "fail at once (exit 75) if the lock is held elsewhere")
	connectTimeoutFlag(cmd, &o.openTimeout)
}

// check reports a usage error (exit 64) in o; name is the subcommand's.
func (o lockOpts) check(name string) error {
	if err := needURL(o.url); err != nil {
		return err
	}
	switch {
	case o.key == "":
		return exitWith(ExitUsage, fmt.Errorf("%s: --key is required", name))
	case o.noWait && o.wait != 0:
		return exitWith(ExitUsage, fmt.Errorf("%s: --wait and --no-wait exclude each other", name))
	case o.wait < 0 || o.ttl < 0:
		return exitWith(ExitUsage, fmt.Errorf("%s: --wait and --ttl must not be negative", name))
	case o.openTimeout <= 0:
		return exitWith(ExitUsage, fmt.Errorf("%s: --connect-timeout must be positive", name))
	case o.owner != "" && !validOwner(o.owner):
		// The library refuses it too, at the first attempt; saying so
		// here does not depend on that attempt's outcome (hold's stdin
		// closing first, an unreachable backend).
		return exitWith(ExitUsage, fmt.Errorf("%s: --owner: the owner id must be 1 to 128 printable ASCII bytes without spaces, got %d bytes", name, len(o.owner)))
	}
	return nil
}

// open opens the Locker of o.url, bounded by --connect-timeout.
func (o lockOpts) open(ctx context.Context) (*distlock.Locker, error) {
	octx, cancel := context.WithTimeout(ctx, o.openTimeout)
	defer cancel()
	return distlock.Open(octx, o.url, distlock.WithLogger(logger))
}

// acquire takes o.key as --wait and --no-wait say. ctx bounds the wait
// (a signal, or hold's stdin closing, cancels it); name is the
// subcommand's, for messages.
func (o lockOpts) acquire(ctx context.Context, locker *distlock.Locker, name string) (*distlock.Lease, error) {
	return o.take(ctx, locker.TryAcquire, locker.Acquire, name, fmt.Sprintf("lock %q", o.key))
}

// acquirePermit takes one permit of the semaphore o.key with limit n, as
// acquire takes a lock.
func (o lockOpts) acquirePermit(ctx context.Context, locker *distlock.Locker, n int, name string) (*distlock.Lease, error) {
	sem, err := locker.Semaphore(o.key, n)
	if err != nil {
		return nil, err
	}
	try := func(ctx context.Context, _ string, opts ...distlock.Option) (*distlock.Lease, error) {
		return sem.TryAcquire(ctx, opts...)
	}
	wait := func(ctx context.Context, _ string, opts ...distlock.Option) (*distlock.Lease, error) {
		return sem.Acquire(ctx, opts...)
	}
	// WithOwner labels the permits (the library adds a suffix of each
	// grant's own): status shows host:pid:random.<suffix>.
	return o.take(ctx, try, wait, name, fmt.Sprintf("all %d permits of semaphore %q", n, o.key))
}

// acquireRW takes the write side (write) or the read side of the
// read-write lock o.key, as acquire takes a lock.
func (o lockOpts) acquireRW(ctx context.Context, locker *distlock.Locker, write bool, name string) (*distlock.Lease, error) {
	m, err := locker.RWMutex(o.key)
	if err != nil {
		return nil, err
	}
	try, wait, what := m.TryRLock, m.RLock, fmt.Sprintf("read-write lock %q (read side)", o.key)
	if write {
		try, wait, what = m.TryLock, m.Lock, fmt.Sprintf("read-write lock %q (write side)", o.key)
	}
	return o.take(ctx, func(ctx context.Context, _ string, opts ...distlock.Option) (*distlock.Lease, error) {
		return try(ctx, opts...)
	},
		func(ctx context.Context, _ string, opts ...distlock.Option) (*distlock.Lease, error) {
			return wait(ctx, opts...)
		}, name, what)
}

// take makes one attempt with try, then (unless --no-wait) waits with
// wait; what names what is taken, for messages. It acquires as --owner, by
// default host:pid:random (for permits, the label of each grant's owner).
func (o lockOpts) take(ctx context.Context, try, wait func(context.Context, string, ...distlock.Option) (*distlock.Lease, error), name, what string) (*distlock.Lease, error) {
	opts := []distlock.Option{distlock.WithOwner(cmp.Or(o.owner, defaultOwner()))}
	if o.ttl > 0 {
		opts = append(opts, distlock.WithTTL(o.ttl))
	}
	// One attempt first, bounded by --connect-timeout: an unreachable
	// backend fails at once (exit 69) instead of being waited out.
	tctx, tcancel := context.WithTimeout(ctx, o.openTimeout)
	lease, err := try(tctx, o.key, opts...)
	timedOut := err != nil && tctx.Err() != nil && ctx.Err() == nil
	tcancel()
	if timedOut && !errors.Is(err, distlock.ErrUnavailable) {
		return nil, exitWith(ExitUnavailable, fmt.Errorf("%s: the backend did not answer within --connect-timeout %v: %w", name, o.openTimeout, err))
	}
	if o.noWait || !errors.Is(err, distlock.ErrNotAcquired) {
		return lease, err
	}
	if o.wait > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, o.wait)
		defer cancel()
	}
	lease, err = wait(ctx, o.key, opts...)
	if errors.Is(err, context.DeadlineExceeded) && !errors.Is(err, distlock.ErrUnavailable) {
		return nil, exitWith(ExitNotAcquired, fmt.Errorf("%s: %s still held elsewhere after waiting %v", name, what, o.wait))
	}
	return lease, err
}
