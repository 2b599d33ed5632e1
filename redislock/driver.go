package redislock

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/distlock/distlock/backend"
	"github.com/distlock/distlock/internal/redisproto"
)

// MinTTL is the shortest lease TTL the driver accepts. Redis expires keys
// with millisecond precision; shorter leases would be all drift margin.
const MinTTL = redisproto.MinTTL

// MaxTTL is the longest lease TTL the driver accepts: the library's limit
// (backend.TTLLimit). Redis itself keeps far longer expiries; the limit
// keeps every millisecond count exact in Lua's numbers.
const MaxTTL = redisproto.MaxTTL

// DefaultPrefix starts every Redis key and channel the driver uses.
const DefaultPrefix = redisproto.DefaultPrefix

// WaitMode is how waiters of a held lock wait for it: WaitQueue (URL
// wait=queue), waiters queue in Redis in arrival order and a release hands
// the lock to the oldest live waiter, whose grant is the hand-off message
// itself (capabilities WaitQueue, Fair; a TryAcquire never jumps the
// queue; not supported with WaitReplicas); WaitNotify (URL wait=notify), a
// release is announced on the key's channel and every waiter retries, the
// first to arrive wins, which may be the releaser itself (no fairness,
// more round trips under contention); WaitDefault picks WaitQueue where
// supported, else WaitNotify. redlock.WaitMode is the same type.
type WaitMode = redisproto.WaitMode

// The wait modes (see WaitMode).
const (
	WaitDefault = redisproto.WaitDefault
	WaitQueue   = redisproto.WaitQueue
	WaitNotify  = redisproto.WaitNotify
)

// Options configures a Driver. The zero value is valid; the caller's struct
// is never modified.
type Options struct {
	// Prefix starts every Redis key and channel the driver uses
	// (DefaultPrefix if empty). It must not contain '{' or '}'.
	Prefix string
	// WaitReplicas, when > 0, makes a grant count only once that many
	// replicas acknowledged it (Redis WAIT, on the connection that wrote
	// the lock). If fewer acknowledge within WaitTimeout, the lock is
	// released again and TryAcquire fails with ErrUnavailable. Not
	// supported with Redis Cluster clients. See docs/redis.md: WAIT narrows
	// the failover window, it does not close it.
	WaitReplicas int
	// WaitTimeout bounds the WAIT (default 1s).
	WaitTimeout time.Duration
	// Wait chooses how waiters wait (see WaitMode). The default is
	// WaitQueue where it is supported (a single server, a Cluster or
	// Redlock, without WaitReplicas), else WaitNotify. Every client of a
	// key must use the same mode.
	Wait WaitMode
	// Logger receives New's warning about a client whose calls its ctx
	// cannot end (see New); slog.Default() if nil. The driver logs nothing
	// else.
	Logger *slog.Logger
}

func (o *Options) normalize() (Options, error) {
	var out Options
	if o != nil {
		out = *o
	}
	var err error
	if out.Prefix, err = redisproto.OptionPrefix("redislock", out.Prefix); err != nil {
		return out, err
	}
	if out.WaitReplicas < 0 {
		return out, fmt.Errorf("redislock: %w: WaitReplicas %d is negative", backend.ErrInvalidConfig, out.WaitReplicas)
	}
	if out.WaitTimeout < 0 {
		return out, fmt.Errorf("redislock: %w: WaitTimeout %v is negative", backend.ErrInvalidConfig, out.WaitTimeout)
	}
	if out.Wait > WaitNotify {
		return out, fmt.Errorf("redislock: %w: unknown Wait mode %v", backend.ErrInvalidConfig, out.Wait)
	}
	if out.Wait == WaitQueue && out.WaitReplicas > 0 {
		return out, fmt.Errorf("redislock: %w: Wait=WaitQueue (wait=queue) and WaitReplicas (wait_replicas) cannot be combined", backend.ErrInvalidConfig)
	}
	if out.Wait == WaitDefault {
		out.Wait = WaitQueue
		if out.WaitReplicas > 0 {
			out.Wait = WaitNotify
		}
	}
	if out.WaitTimeout == 0 {
		out.WaitTimeout = time.Second
	}
	return out, nil
}

// Driver is a backend.Driver over one Redis deployment reached through one
// go-redis client: a single server (possibly with replicas) or a Redis
// Cluster. It also implements backend.Notifier, backend.Inspector,
// backend.Waiter in queue mode, and backend.Batcher
// (RefreshAll everywhere; TryAcquireMulti declared on a single server
// without WaitReplicas: multi.go). It is safe for concurrent use.
type Driver struct {
	routes // the entry points (kinds.go)

	c      redis.UniversalClient
	owned  bool // the driver opened c and closes it
	opts   Options
	caps   backend.Capabilities
	notify *redisproto.Notifier
	inbox  string // queue mode: the channel hand-offs to this driver's waiters go to
	bounds redisproto.ClientBounds

	closeOnce sync.Once
	closeErr  error
}

var (
	_ backend.Driver    = (*Driver)(nil)
	_ backend.Notifier  = (*Driver)(nil)
	_ backend.Inspector = (*Driver)(nil)
	_ backend.Waiter    = (*Driver)(nil)
	_ backend.Batcher   = (*Driver)(nil)
)

// New returns a Driver using c, which may be a *redis.Client (one server)
// or a *redis.ClusterClient. The driver never closes c; the caller does,
// after closing the Driver (or the distlock.Locker that owns it). opts may
// be nil.
//
// What the driver needs from c: nothing for safety (a lease ends at its
// deadline whatever c does, and every driver call returns by its ctx's
// deadline), but a client that ends its own calls at their ctx's deadline
// is the one that does not pile up calls nobody waits for. go-redis ends
// a read or write at the ctx's deadline only with ContextTimeoutEnabled:
// true and a ReadTimeout and WriteTimeout that are not -2 (which disables
// deadlines); without it (go-redis's default) a read waits its ReadTimeout
// (default 5 s), whatever the ctx says. On such a client the driver runs
// each call whose ctx has a deadline on a goroutine of its own and stops
// waiting for it when the deadline passes or ctx is cancelled (the
// watchdog's renewal at the lease's deadline, an Acquire's or a Release's
// deadline; a ctx without a deadline ends a call no sooner than with
// ContextTimeoutEnabled, at go-redis's own timeouts; an acquisition first
// waits up to a second more for its call, to give back what it may have
// taken before it returns). The call then goes on in the background, its connection busy, until go-redis returns it,
// at the ReadTimeout or when the server answers; a grant it brings back is
// given back. With ReadTimeout -1 (no timeout) or -2, and a stalled
// server, that is never: each such call holds a connection of c's pool and
// a goroutine until the server answers or the connection breaks. New logs
// a warning (Options.Logger, else slog.Default()) naming the setting when
// c does not end calls at their ctx's deadline, and when c is not a
// *redis.Client, *redis.ClusterClient or *redis.Ring (whose options it
// cannot read). Recommended: ContextTimeoutEnabled: true, a ReadTimeout
// shorter than a third of the shortest lease TTL, and MaxRetries -1 (the
// portable layer retries; go-redis retries a timed-out read MaxRetries
// times, each waiting ReadTimeout, while the ctx lasts). distlock.Open's
// clients are made that way.
func New(c redis.UniversalClient, opts *Options) (*Driver, error) {
	if c == nil {
		return nil, fmt.Errorf("redislock: %w: nil client", backend.ErrInvalidConfig)
	}
	o, err := opts.normalize()
	if err != nil {
		return nil, err
	}
	_, cluster := c.(*redis.ClusterClient)
	if cluster && o.WaitReplicas > 0 {
		return nil, fmt.Errorf("redislock: %w: WaitReplicas (wait_replicas) is not supported with a Redis Cluster client", backend.ErrInvalidConfig)
	}
	d := &Driver{c: c, opts: o, notify: redisproto.NewNotifier(c), inbox: o.Prefix + ":inbox:" + redisproto.NewID(), bounds: redisproto.BoundsOf(c)}
	d.routes = byKind.WaitingNotifying(d)
	lg := o.Logger
	if lg == nil {
		lg = slog.Default()
	}
	d.bounds.Warn(lg, "redislock")
	d.caps = backend.Capabilities{
		Name:                "redis",
		Wait:                backend.WaitNotify,
		Lifetime:            backend.LifetimeTTL,
		PerLockTTL:          true,
		MinTTL:              MinTTL,
		MaxTTL:              MaxTTL,
		CrossProcessReentry: true,
		Replication:         "single primary; asynchronous replication can lose a grant on failover",
		BatchRefresh:        true, // lock.go
		Values:              true, // announce.go
		Inspect:             true, // inspect.go
		ForceRelease:        true, // force.go
		Server:              redisproto.ServerOf(c),
	}
	if o.Wait == WaitQueue {
		d.caps.Wait, d.caps.Fair = backend.WaitQueue, true
	}
	if o.WaitReplicas == 0 {
		d.caps.Semaphore = backend.WaitNotify // semaphore.go; its grants do not WAIT for replicas
		d.caps.RW = backend.WaitNotify        // rwlock.go
		_, single := c.(*redis.Client)
		d.caps.MultiAtomic = single // multi.go
	}
	if cluster {
		d.caps.Name = "redis-cluster"
		d.caps.Replication = "Redis Cluster: one primary per slot; asynchronous replication can lose a grant on failover"
	}
	if o.WaitReplicas > 0 {
		d.caps.Replication = fmt.Sprintf("single primary; a grant waits for %d replica(s) to acknowledge (WAIT), which narrows but does not close the failover gap", o.WaitReplicas)
	}
	return d, nil
}

// Capabilities implements backend.Driver.
func (d *Driver) Capabilities() backend.Capabilities { return d.caps }

// Client returns the go-redis client the driver uses.
func (d *Driver) Client() redis.UniversalClient { return d.c }

// Close stops the driver's pub/sub connection and, if the driver opened its
// client from a URL, closes it. Held locks are abandoned to expire by TTL.
func (d *Driver) Close() error {
	d.closeOnce.Do(func() {
		err := d.notify.Close()
		if d.owned {
			err = errors.Join(err, redisproto.IgnoreClosed(d.c.Close()))
		}
		d.closeErr = err
	})
	return d.closeErr
}

func (d *Driver) keys(key string) redisproto.Keyset { return redisproto.KeysFor(d.opts.Prefix, key) }

// tryMutex implements backend.Driver: one run of the acquire script,
// followed by WAIT when Options.WaitReplicas is set.
func (d *Driver) tryMutex(ctx context.Context, req backend.Request) (backend.Grant, error) {
	if err := ctx.Err(); err != nil {
		// Nothing was sent: nothing to clean up.
		return backend.Grant{}, fmt.Errorf("redislock: acquire %q: %w", req.Key, context.Cause(ctx))
	}
	ks := d.keys(req.Key)
	hold := redisproto.NewID()
	sent := time.Now()
	var res redisproto.AcquireResult
	var err error
	if !d.awaits(ctx) {
		res, err = d.acquire(ctx, ks, req.Owner, hold, req.TTL)
	} else {
		ks := ks // captured: a copy made on this path only
		res, err = await(d, ctx, func() (redisproto.AcquireResult, error) { return d.acquire(ctx, ks, req.Owner, hold, req.TTL) },
			func(res redisproto.AcquireResult, err error) {
				// The caller stopped waiting: give back what the attempt
				// may have taken.
				if (err == nil && res.Held) || (err != nil && !neverSent(err)) {
					lateRelease(func(ctx context.Context) error { return d.cleanup(ctx, ks, req.Owner, hold) })
				}
			}, redisproto.CleanupTimeout)
	}
	if err != nil && abandoned(err) {
		return backend.Grant{}, fmt.Errorf("redislock: acquire %q: %w: %w (a hold it took is given back; if the call is still out, when it ends)", req.Key, backend.ErrUnavailable, err)
	}
	if err != nil {
		var wf *waitFailedError
		if redisproto.NotAllowed(err) && !errors.As(err, &wf) {
			// Refused before the script ran: nothing to clean up.
			return backend.Grant{}, fmt.Errorf("redislock: acquire %q: %w: %w", req.Key, backend.ErrInvalidConfig, err)
		}
		d.suspect(err)
		// The script may have run: remove this attempt's hold, if any.
		var cerr error
		if !neverSent(err) {
			cerr = d.cleanup(ctx, ks, req.Owner, hold)
		}
		return backend.Grant{}, fmt.Errorf("redislock: acquire %q: %w: %w", req.Key, errKind(err), redisproto.AlsoFailed(err, cerr))
	}
	if !res.Held {
		return backend.Grant{}, backend.NotAcquired(req.Key, res.PTTL)
	}
	l := &lock{d: d, key: req.Key, ks: ks, owner: req.Owner, hold: hold}
	if d.opts.WaitReplicas > 0 && res.Acked < d.opts.WaitReplicas {
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), redisproto.CleanupTimeout)
		defer cancel()
		rerr := l.Release(rctx)
		return backend.Grant{}, fmt.Errorf("redislock: acquire %q: %w: only %d of %d replica(s) acknowledged within %v (the grant was released again: %v)",
			req.Key, backend.ErrUnavailable, res.Acked, d.opts.WaitReplicas, d.opts.WaitTimeout, rerr)
	}
	return backend.Grant{Lock: l, Token: res.Token, ValidFrom: sent}, nil
}

// suspect makes a Cluster client reload its slot map soon after a command
// failed: a dead primary answers no MOVED, and a client given to New keeps
// its own reload interval (go-redis's default is a minute), so it would go
// on sending that slot's commands to the dead node.
func (d *Driver) suspect(err error) {
	if cc, ok := d.c.(*redis.ClusterClient); ok && err != nil && !errors.Is(err, redis.Nil) {
		cc.ReloadState(context.Background())
	}
}

// neverSent reports whether a command failed before it could reach the
// server (no connection could be made), so that it cannot have run.
func neverSent(err error) bool {
	var op *net.OpError
	return errors.As(err, &op) && op.Op == "dial"
}

// errKind is the portable kind of a failed command: ErrInvalidConfig when
// the ACL refused it (no retry fixes that), else ErrUnavailable.
func errKind(err error) error {
	if redisproto.NotAllowed(err) || redisproto.ScriptRefused(err) {
		return backend.ErrInvalidConfig
	}
	return backend.ErrUnavailable
}

// cleanup gives back the hold a failed acquisition attempt may have left
// (only that attempt's: never another hold of the same owner).
func (d *Driver) cleanup(ctx context.Context, ks redisproto.Keyset, owner, hold string) error {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), redisproto.CleanupTimeout)
	defer cancel()
	_, err := await(d, ctx, func() (int64, error) { return redisproto.ReleaseHold(ctx, d.c, ks, owner, hold, "release") }, nil, 0)
	if err != nil {
		return fmt.Errorf("cleanup failed, the lock expires by its TTL: %w", err)
	}
	return nil
}

// acquire runs the acquire script, with WAIT on the same connection when
// replicas must acknowledge.
func (d *Driver) acquire(ctx context.Context, ks redisproto.Keyset, owner, hold string, ttl time.Duration) (redisproto.AcquireResult, error) {
	if d.opts.Wait == WaitQueue {
		return d.fairAttempt(ctx, ks, owner, ttl, false, 0, hold, 0)
	}
	keys := []string{ks.Lock, ks.Fence}
	args := []any{owner, redisproto.Millis(ttl), hold}
	if d.opts.WaitReplicas == 0 {
		return redisproto.AcquireReply(redisproto.AcquireScript.Run(ctx, d.c, keys, args...), ttl)
	}
	var acq *redis.Cmd
	var wait *redis.Cmd
	run := func(sha bool) error {
		_, err := d.c.Pipelined(ctx, func(p redis.Pipeliner) error {
			if sha {
				acq = redisproto.AcquireScript.EvalSha(ctx, p, keys, args...)
			} else {
				acq = redisproto.AcquireScript.Eval(ctx, p, keys, args...)
			}
			wait = p.Do(ctx, "WAIT", d.opts.WaitReplicas, redisproto.Millis(d.opts.WaitTimeout)) // 0 would wait forever
			return nil
		})
		return err
	}
	err := run(true)
	if redis.HasErrorPrefix(acq.Err(), "NOSCRIPT") {
		err = run(false)
	}
	if err != nil && acq.Err() == nil && wait.Err() != nil {
		// The script ran (it may have granted), WAIT did not: the
		// caller must give the hold back even when the error is a
		// refusal (an ACL without +wait).
		return redisproto.AcquireResult{}, &waitFailedError{err: wait.Err()}
	}
	if err != nil {
		return redisproto.AcquireResult{}, err
	}
	r, err := redisproto.AcquireReply(acq, ttl)
	if err != nil {
		return redisproto.AcquireResult{}, err
	}
	acked, _ := wait.Int64()
	r.Acked = int(acked)
	return r, err
}

// waitFailedError is a WAIT that failed after the acquire script it
// followed had run: whatever the error, the script may have granted.
type waitFailedError struct{ err error }

func (e *waitFailedError) Error() string { return "WAIT after the acquire script: " + e.err.Error() }
func (e *waitFailedError) Unwrap() error { return e.err }
