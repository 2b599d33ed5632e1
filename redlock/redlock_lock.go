package redlock

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/distlock/distlock/backend"
	"github.com/distlock/distlock/internal/redisproto"
)

// rlock is a lock held on a majority of a Redlock's nodes.
type rlock struct {
	r     *Driver
	key   string
	ks    redisproto.Keyset
	owner string
	hold  string // the attempt that took it, on every node
	back  *giveBack

	released atomic.Bool // Release was called: a second call is refused locally
}

// Release implements backend.Lock: it releases on every node, and
// succeeds if a majority of nodes held the lock for its owner (see
// verdict).
func (l *rlock) Release(ctx context.Context) error {
	if !l.released.CompareAndSwap(false, true) {
		return fmt.Errorf("redlock: release %q: %w: already released", l.key, backend.ErrNotHeld)
	}
	l.back.start()
	start := time.Now()
	defer func() { l.r.released(l.key, time.Since(start)) }()
	released, errs := eachNode(l.r, ctx, releaseTimeout, func(ctx context.Context, i int, nd *node) (bool, error) {
		if i > 0 {
			v, err := redisproto.ReleaseHold(ctx, nd.c, l.ks, l.owner, l.hold, "quiet")
			return err == nil && v >= 0, err
		}
		v, heard, err := releaseCounting(ctx, nd.c, l.ks, l.owner, l.hold)
		if heard > 0 {
			// Others wait for the key: this driver's next attempt on it
			// yields to them and asks the first node first.
			l.r.observe(l.key)
		}
		return err == nil && v >= 0, err
	})
	if errs[0] != nil {
		// The first node did not answer: announce the release on the
		// nodes that freed the lock, whose waiters skip the first node
		// while it fails.
		eachNode(l.r, context.WithoutCancel(ctx), redisproto.CleanupTimeout, func(ctx context.Context, i int, nd *node) (struct{}, error) {
			if released[i] {
				return struct{}{}, nd.c.Publish(ctx, l.ks.Channel, "released").Err()
			}
			return struct{}{}, nil
		})
	}
	return verdict("release", l.key, released, errs, l.r.quorum)
}

// Refresh implements backend.Lock: the lock stays held if a majority of
// nodes still held it for its owner and extended it.
func (l *rlock) Refresh(ctx context.Context, ttl time.Duration) error {
	vals, errs := eachNode(l.r, ctx, nodeTimeout(ttl, 1), func(ctx context.Context, _ int, nd *node) (int64, error) {
		return redisproto.RefreshScript.Run(ctx, nd.c, []string{l.ks.Lock}, l.owner, redisproto.Millis(ttl), l.hold).Int64()
	})
	return l.r.refreshVerdict(l.key, vals, errs)
}

// refreshVerdict decides a refresh from the nodes' replies (1: held
// and extended).
func (r *Driver) refreshVerdict(key string, vals []int64, errs []error) error {
	held := make([]bool, len(vals))
	for i, v := range vals {
		held[i] = errs[i] == nil && v == 1
	}
	return verdict("refresh", key, held, errs, r.quorum)
}

// verdict decides a refresh or a release (op) from the nodes' answers:
// held[i], node i held the lock for its owner (and extended or freed it);
// a node that answered without holding it counts against. The lock was
// held only if a majority held it: a minority's holds are stragglers of a
// lock that lapsed on the others, where another owner may hold the key now
// (a release still frees them, but must not tell the caller its critical
// section was protected): ErrNotHeld. If failed nodes leave it undecided:
// ErrUnavailable.
func verdict(op, key string, held []bool, errs []error, quorum int) error {
	ok, notHeld := 0, 0
	for i := range held {
		switch {
		case held[i]:
			ok++
		case errs[i] == nil:
			notHeld++
		}
	}
	switch {
	case ok >= quorum:
		return nil
	case notHeld > len(held)-quorum:
		return fmt.Errorf("redlock: %s %q: %w: held on only %d of %d nodes", op, key, backend.ErrNotHeld, ok, len(held))
	default:
		return fmt.Errorf("redlock: %s %q: %w: held on %d of %d nodes, need %d: %w", op, key, backend.ErrUnavailable, ok, len(held), quorum, errors.Join(errs...))
	}
}

// TryAcquireMulti implements backend.Batcher, which Redlock declares only
// for RefreshAll (Capabilities.MultiAtomic is false: the nodes take a set
// of keys one node at a time, not in one step of one store).
func (r *Driver) TryAcquireMulti(context.Context, []backend.Request) ([]backend.Grant, error) {
	return nil, fmt.Errorf("redlock: acquire several keys: %w: no multi-lock step", backend.ErrUnsupported)
}

// RefreshAll implements backend.Batcher: one pipeline per node, all
// nodes at once.
func (r *Driver) RefreshAll(ctx context.Context, locks []backend.Lock, ttls []time.Duration) []error {
	out := make([]error, len(locks))
	mine := backend.OwnLocks("redlock", locks, out, func(l *rlock) bool { return l.r == r })
	cmds, perr := eachNode(r, ctx, nodeTimeout(minTTL(ttls), 1), func(ctx context.Context, _ int, nd *node) ([]*redis.Cmd, error) {
		return redisproto.PipelineRefresh(ctx, nd.c, mine, ttls, func(l *rlock) (redisproto.Keyset, string, string) { return l.ks, l.owner, l.hold })
	})
	for i, l := range mine {
		if l == nil {
			continue
		}
		vals := make([]int64, len(r.nodes))
		errs := make([]error, len(r.nodes))
		for k := range r.nodes {
			if perr[k] != nil || cmds[k] == nil || cmds[k][i] == nil {
				errs[k] = fmt.Errorf("node %d: %w", k, perr[k])
				continue
			}
			vals[k], errs[k] = cmds[k][i].Int64()
		}
		out[i] = r.refreshVerdict(l.key, vals, errs)
	}
	return out
}

func minTTL(ttls []time.Duration) time.Duration {
	var m time.Duration
	for _, t := range ttls {
		if m == 0 || t < m {
			m = t
		}
	}
	return m
}

// releaseCounting is release on Redlock's first node: it also returns how
// many connections heard the lock announced free (waiters of the key).
func releaseCounting(ctx context.Context, c redis.Scripter, ks redisproto.Keyset, owner, hold string) (n, heard int64, err error) {
	v, err := redisproto.ReleaseScript.Run(ctx, c, ks.ReleaseKeys(), redisproto.ReleaseArgs(owner, hold, "count")...).Result()
	if err != nil {
		return 0, 0, err
	}
	switch v := v.(type) {
	case int64:
		return v, 0, nil
	case []any:
		if len(v) == 2 {
			n, _ := v[0].(int64)
			heard, _ := v[1].(int64)
			return n, heard, nil
		}
	}
	return 0, 0, fmt.Errorf("unexpected reply %v from the release script", v)
}

// announce is the release mode on node i: only the first node announces a
// release ("released" on the key's channel), because waiters ask the first
// node first (see Redlock.TryAcquire) and a wake-up from another node would
// send them to a first node still held; Release announces on the others
// too when the first node fails.
func announce(i int) string {
	if i == 0 {
		return "release"
	}
	return "quiet"
}

// releaseTimeout bounds each node's part of a Redlock release.
const releaseTimeout = 5 * time.Second
