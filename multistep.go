package distlock

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/distlock/distlock/backend"
)

// How AcquireAll takes its keys, and gives them back. The one-step path:
// on a store that takes several keys in one atomic step (backend.Batcher,
// Capabilities.MultiAtomic), AcquireAll and TryAcquireAll first ask the
// store for every key at once.
// Each key still gets its own hold, and so its own Lease with its own
// token, renewal, doubt and loss, exactly as if it had been acquired
// alone: only the taking is shared. The ordered path (takeInOrder) takes
// over when the step cannot decide: the store cannot take this set in one
// step, this Locker already has a hold of the owner on one of the keys
// (a re-entry, counted by the ordered path's Acquires), or, for
// AcquireAll, a key is held elsewhere or the store did not answer.

// takeAll takes every key of keys (sorted, distinct) under owner: in one
// store step where the store has one, else one after another.
func (l *Locker) takeAll(ctx context.Context, keys []string, owner string, opts []Option, wait bool) ([]*Lease, error) {
	if l.multi != nil && len(keys) > 1 {
		if leases, done, err := l.takeAtOnce(ctx, keys, owner, opts, wait); done {
			return leases, err
		}
	}
	return l.takeInOrder(ctx, keys, opts, wait)
}

// takeAtOnce makes one attempt at every key in one store step. done is
// false when the ordered path must take over (nothing is held then).
func (l *Locker) takeAtOnce(ctx context.Context, keys []string, owner string, opts []Option, wait bool) (leases []*Lease, done bool, err error) {
	c := applyOptions(opts)
	ttl, err := l.ttlFor(c)
	if err != nil || !l.begin() {
		return nil, false, nil // the ordered path reports it, naming the key
	}
	defer l.ops.Done()
	ctx, bound := l.bindClose(ctx)
	defer bound.stop()
	holds := l.claimAll(keys, owner)
	if holds == nil {
		return nil, false, nil
	}
	// One TryAcquire per key as telemetry sees it: an AcquireAll whose
	// step is blocked is then measured again by the ordered path's waits.
	ops := make([]acquireOp, len(holds))
	actx := make([]context.Context, len(holds))
	reqs := make([]backend.Request, len(holds))
	for i, h := range holds {
		actx[i], ops[i] = l.tel.startAcquire(ctx, h.key, false, primMulti)
		reqs[i] = backend.Request{
			Key: h.key, Owner: owner, TTL: ttl, Drift: l.cfg.drift(ttl),
			OnLost:     func(err error) { l.driverLost(h, err) },
			OnDoubt:    func(cause error, until time.Time) { l.driverDoubt(h, cause, until) },
			OnRestored: func() { l.driverRestored(h) },
		}
	}
	started := time.Now()
	grants, err := l.multi.TryAcquireMulti(ctx, reqs)
	err = unanswered(ctx, err)
	l.tel.storeError(ctx, "acquire", err)
	if err == nil && len(grants) != len(reqs) {
		l.releaseGrants(grants)
		err = fmt.Errorf("the %s driver granted %d locks for %d keys", l.caps.Name, len(grants), len(reqs))
	}
	if err == nil {
		err = l.lateGrants(holds, grants, ttl, started)
	}
	if err != nil {
		for i, h := range holds {
			_, _ = l.settle(actx[i], h, backend.Grant{}, err, ttl, false)
			ops[i].end(ctx, nil, err)
		}
		if errors.Is(err, ErrUnsupported) || wait && ctx.Err() == nil && (errors.Is(err, ErrNotAcquired) || errors.Is(err, ErrUnavailable)) {
			return nil, false, nil
		}
		return nil, true, multiStepErr(keys, err)
	}
	return l.settleAll(ctx, actx, ops, holds, grants, started, ttl, !c.noRenew)
}

// lateGrants gives every grant of a store step back and returns an error
// matching ErrUnavailable if any of them arrived after its validity ran
// out (see Locker.valid); nil if all are valid. holds[i] is the pending
// hold of grants[i].
func (l *Locker) lateGrants(holds []*hold, grants []backend.Grant, ttl time.Duration, sent time.Time) error {
	for i, g := range grants {
		if g.ValidFrom.IsZero() {
			g.ValidFrom = sent
		}
		l.mu.Lock()
		end := l.grantEnd(holds[i], g, grantLife(g, ttl))
		l.mu.Unlock()
		if late := time.Since(end); late >= 0 {
			l.releaseGrants(grants)
			return fmt.Errorf("%w: the grants arrived %v after their validity ran out", ErrUnavailable, late.Round(time.Millisecond))
		}
	}
	return nil
}

// settleAll records the grants of a store step, one per hold. If any
// cannot be recorded (the Locker closed meanwhile, a key was reported
// lost before its grant was recorded), the others are released again.
func (l *Locker) settleAll(ctx context.Context, actx []context.Context, ops []acquireOp, holds []*hold, grants []backend.Grant, started time.Time, ttl time.Duration, autoRenew bool) ([]*Lease, bool, error) {
	leases := make([]*Lease, 0, len(holds))
	var errs []error
	for i, h := range holds {
		g := grants[i]
		if g.ValidFrom.IsZero() {
			g.ValidFrom = started
		}
		le, err := l.settle(actx[i], h, g, nil, ttl, autoRenew)
		ops[i].end(ctx, le, err)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		leases = append(leases, le)
	}
	if errs == nil {
		return leases, true, nil
	}
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), l.cfg.releaseTimeout)
	defer cancel()
	if rerr := releaseLeases(rctx, leases); rerr != nil {
		errs = append(errs, fmt.Errorf("releasing the %d keys taken: %w", len(leases), rerr))
	}
	return nil, true, fmt.Errorf("distlock: acquire all: %w", errors.Join(errs...))
}

// claimAll registers a pending hold of owner on every key, or returns nil
// (registering none) if this Locker has a hold of owner on any of them:
// the ordered path re-enters it, or waits for it to resolve, as Acquire
// does.
func (l *Locker) claimAll(keys []string, owner string) []*hold {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, k := range keys {
		if l.holds[holdKey{k, owner, 0}] != nil {
			return nil
		}
	}
	holds := make([]*hold, len(keys))
	for i, k := range keys {
		h := newHold(holdKey{k, owner, 0}, holdTag{l.tel.label(k), primMulti})
		l.holds[h.hk()] = h
		holds[i] = h
	}
	return holds
}

// releaseGrants gives back, in the background, grants the Locker will not
// record.
func (l *Locker) releaseGrants(grants []backend.Grant) {
	for _, g := range grants {
		if g.Lock != nil {
			lock := g.Lock
			l.goCall(func() { l.releaseQuietly(lock) })
		}
	}
}

// multiStepErr explains a failed store step, naming the held key when the
// store said which.
func multiStepErr(keys []string, err error) error {
	var na *backend.NotAcquiredError
	if errors.As(err, &na) && na.Key != "" {
		return fmt.Errorf("distlock: acquire all: key %q (one step for %d keys): %w", na.Key, len(keys), err)
	}
	return fmt.Errorf("distlock: acquire all: %d keys in one step: %w", len(keys), err)
}

// takeInOrder acquires keys one after another, in their order, and
// releases those taken if one fails.
func (l *Locker) takeInOrder(ctx context.Context, keys []string, opts []Option, wait bool) ([]*Lease, error) {
	leases := make([]*Lease, 0, len(keys))
	for _, k := range keys {
		le, err := l.acquirePrim(ctx, k, opts, wait, primMulti)
		if err != nil {
			rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), l.cfg.releaseTimeout)
			rerr := releaseLeases(rctx, leases)
			cancel()
			if rerr != nil {
				rerr = fmt.Errorf("releasing the %d keys taken: %w", len(leases), rerr)
			}
			return nil, errors.Join(fmt.Errorf("distlock: acquire all: key %q (%d of %d): %w", k, len(leases)+1, len(keys), err), rerr)
		}
		leases = append(leases, le)
	}
	return leases, nil
}

// releaseWorkers bounds the releases a MultiLease sends at once.
const releaseWorkers = 16

// releaseLeases releases every lease, several at a time, and joins their
// errors.
func releaseLeases(ctx context.Context, leases []*Lease) error {
	errs := make([]error, len(leases))
	sem := make(chan struct{}, releaseWorkers)
	var wg sync.WaitGroup
	for i, le := range leases {
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			errs[i] = le.Release(ctx)
		})
	}
	wg.Wait()
	return errors.Join(errs...)
}
