package redislock

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/distlock/distlock/backend"
)

// MinTTL is the shortest lease TTL the driver accepts. Redis expires keys
// with millisecond precision; shorter leases would be all drift margin.
const MinTTL = 10 * time.Millisecond

// MaxTTL is the longest lease TTL the driver accepts: the library's limit
// (backend.TTLLimit). Redis itself keeps far longer expiries; the limit
// keeps every millisecond count exact in Lua's numbers.
const MaxTTL = backend.TTLLimit

// cleanupTimeout bounds the owner-checked cleanup after an acquisition
// whose outcome is unknown.
const cleanupTimeout = time.Second

var errClosed = fmt.Errorf("redislock: %w", backend.ErrClosed)

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

// WaitMode is how waiters of a held lock wait for it.
type WaitMode uint8

const (
	// WaitDefault picks WaitQueue where supported, else WaitNotify.
	WaitDefault WaitMode = iota
	// WaitQueue (URL wait=queue): waiters queue in Redis in arrival order
	// and a release hands the lock to the oldest live waiter, whose grant
	// is the hand-off message itself (capabilities WaitQueue, Fair). A
	// TryAcquire never jumps the queue (in Redlock mode: never on the
	// first node, where the queue is; see docs/redis.md). Not supported
	// with WaitReplicas.
	WaitQueue
	// WaitNotify (URL wait=notify): a release is announced on the key's
	// channel and every waiter retries; the first to arrive wins, which may
	// be the releaser itself (no fairness, more round trips under
	// contention).
	WaitNotify
)

// String returns the URL spelling of m.
func (m WaitMode) String() string {
	switch m {
	case WaitDefault:
		return "default"
	case WaitQueue:
		return "queue"
	case WaitNotify:
		return "notify"
	}
	return fmt.Sprintf("WaitMode(%d)", uint8(m))
}

func (o *Options) normalize() (Options, error) {
	var out Options
	if o != nil {
		out = *o
	}
	if out.Prefix == "" {
		out.Prefix = DefaultPrefix
	}
	if err := checkPrefix(out.Prefix); err != nil {
		return out, fmt.Errorf("redislock: %w: %v", backend.ErrInvalidConfig, err)
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
// Cluster. It also implements backend.Notifier, backend.Withdrawer,
// backend.Inspector, backend.Waiter in queue mode, and backend.Batcher
// (RefreshAll everywhere; TryAcquireMulti declared on a single server
// without WaitReplicas: multi.go). It is safe for concurrent use.
type Driver struct {
	c      redis.UniversalClient
	owned  bool // the driver opened c and closes it
	opts   Options
	caps   backend.Capabilities
	notify *notifier
	inbox  string // queue mode: the channel hand-offs to this driver's waiters go to
	bounds clientBounds

	closeOnce sync.Once
	closeErr  error
}

var (
	_ backend.Driver     = (*Driver)(nil)
	_ backend.Notifier   = (*Driver)(nil)
	_ backend.Inspector  = (*Driver)(nil)
	_ backend.Waiter     = (*Driver)(nil)
	_ backend.Batcher    = (*Driver)(nil)
	_ backend.Withdrawer = (*Driver)(nil)
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
	d := &Driver{c: c, opts: o, notify: newNotifier(c), inbox: o.Prefix + ":inbox:" + newID(), bounds: boundsOf(c)}
	lg := o.Logger
	if lg == nil {
		lg = slog.Default()
	}
	d.bounds.warn(lg)
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
		err := d.notify.close()
		if d.owned {
			err = errors.Join(err, ignoreClosed(d.c.Close()))
		}
		d.closeErr = err
	})
	return d.closeErr
}

func ignoreClosed(err error) error {
	if errors.Is(err, redis.ErrClosed) {
		return nil
	}
	return err
}

func (d *Driver) keys(key string) keyset { return keysFor(d.opts.Prefix, key) }

// tryMutex implements backend.Driver: one run of the acquire script,
// followed by WAIT when Options.WaitReplicas is set.
func (d *Driver) tryMutex(ctx context.Context, req backend.Request) (backend.Grant, error) {
	if err := ctx.Err(); err != nil {
		// Nothing was sent: nothing to clean up.
		return backend.Grant{}, fmt.Errorf("redislock: acquire %q: %w", req.Key, context.Cause(ctx))
	}
	ks := d.keys(req.Key)
	hold := newID()
	sent := time.Now()
	var res acquireResult
	var err error
	if !d.awaits(ctx) {
		res, err = d.acquire(ctx, ks, req.Owner, hold, req.TTL)
	} else {
		ks := ks // captured: a copy made on this path only
		res, err = await(d, ctx, func() (acquireResult, error) { return d.acquire(ctx, ks, req.Owner, hold, req.TTL) },
			func(res acquireResult, err error) {
				// The caller stopped waiting: give back what the attempt
				// may have taken.
				if (err == nil && res.held) || (err != nil && !neverSent(err)) {
					lateRelease(func(ctx context.Context) error { return d.cleanup(ctx, ks, req.Owner, hold) })
				}
			}, cleanupTimeout)
	}
	if err != nil && abandoned(err) {
		return backend.Grant{}, fmt.Errorf("redislock: acquire %q: %w: %w (a hold it took is given back; if the call is still out, when it ends)", req.Key, backend.ErrUnavailable, err)
	}
	if err != nil {
		var wf *waitFailedError
		if notAllowed(err) && !errors.As(err, &wf) {
			// Refused before the script ran: nothing to clean up.
			return backend.Grant{}, fmt.Errorf("redislock: acquire %q: %w: %w", req.Key, backend.ErrInvalidConfig, err)
		}
		d.suspect(err)
		// The script may have run: remove this attempt's hold, if any.
		var cerr error
		if !neverSent(err) {
			cerr = d.cleanup(ctx, ks, req.Owner, hold)
		}
		return backend.Grant{}, fmt.Errorf("redislock: acquire %q: %w: %w", req.Key, errKind(err), alsoFailed(err, cerr))
	}
	if !res.held {
		return backend.Grant{}, backend.NotAcquired(req.Key, res.pttl)
	}
	l := &lock{d: d, key: req.Key, ks: ks, owner: req.Owner, hold: hold}
	if d.opts.WaitReplicas > 0 && res.acked < d.opts.WaitReplicas {
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), cleanupTimeout)
		defer cancel()
		rerr := l.Release(rctx)
		return backend.Grant{}, fmt.Errorf("redislock: acquire %q: %w: only %d of %d replica(s) acknowledged within %v (the grant was released again: %v)",
			req.Key, backend.ErrUnavailable, res.acked, d.opts.WaitReplicas, d.opts.WaitTimeout, rerr)
	}
	return backend.Grant{Lock: l, Token: res.token, ValidFrom: sent}, nil
}

// notAllowed reports whether Redis refused the client's credentials or
// permissions (a wrong password, a disabled user, a missing ACL command or
// key pattern): a configuration error that no retry fixes. A script refused
// one of its commands only after the ones before it ran; Redis's own
// refusal of scripts with missing permissions happens before they start.
func notAllowed(err error) bool {
	// go-redis wraps a refusal met while connecting ("failed to
	// authenticate: WRONGPASS ..."), so look for the code anywhere.
	msg := err.Error()
	return strings.Contains(msg, "WRONGPASS") || strings.Contains(msg, "NOAUTH ") || strings.Contains(msg, "NOPERM ")
}

// alsoFailed is err, and what failed after it (a cleanup, leaving a
// queue) if anything did, in one line.
func alsoFailed(err, after error) error {
	if after == nil {
		return err
	}
	return fmt.Errorf("%w (and: %w)", err, after)
}

// loginRefused reports whether Redis refused the client's login: no
// password where one is wanted (NOAUTH) or a wrong user or password, or a
// disabled user (WRONGPASS).
func loginRefused(err error) bool {
	msg := err.Error()
	return strings.Contains(msg, "WRONGPASS") || strings.Contains(msg, "NOAUTH ")
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
	if notAllowed(err) || scriptRefused(err) {
		return backend.ErrInvalidConfig
	}
	return backend.ErrUnavailable
}

// scriptRefused reports whether the ACL refused a command inside a script
// (Redis 7.0: "The user executing the script can't run this command or
// subcommand", "... can't publish to the channel ...", "... can't access
// at least one of the keys ..."; Redis 7.2 and later: "ACL failure in
// script: ..."): also a configuration error, but the commands before it
// ran.
func scriptRefused(err error) bool {
	msg := err.Error()
	return strings.Contains(msg, "user executing the script can't") || strings.Contains(msg, "ACL failure in script")
}

// cleanup gives back the hold a failed acquisition attempt may have left
// (only that attempt's: never another hold of the same owner).
func (d *Driver) cleanup(ctx context.Context, ks keyset, owner, hold string) error {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), cleanupTimeout)
	defer cancel()
	_, err := await(d, ctx, func() (int64, error) { return release(ctx, d.c, ks, owner, hold, "release") }, nil, 0)
	if err != nil {
		return fmt.Errorf("cleanup failed, the lock expires by its TTL: %w", err)
	}
	return nil
}

// acquireResult is the acquire script's reply.
type acquireResult struct {
	held    bool
	token   uint64
	pttl    time.Duration
	counter uint64 // Redlock: the counter's value after the call
	acked   int    // replicas that acknowledged (WAIT)
}

// acquireReply reads the reply of acquireScript or waitScript run with
// TTL ttl: a lone integer is a fresh grant (freshGrant), anything else
// goes to parseAcquire.
func acquireReply(cmd *redis.Cmd, ttl time.Duration) (acquireResult, error) {
	v, err := cmd.Result()
	if err != nil {
		return acquireResult{}, err
	}
	if token, ok := v.(int64); ok {
		return freshGrant(token, ttl)
	}
	vs, err := cmd.Int64Slice()
	if err != nil {
		return acquireResult{}, err
	}
	return parseAcquire(vs)
}

// freshGrant is the reply of a script that took a free lock for its full
// TTL ttl and minted token, which it replies alone: the same as {1, token,
// ttl, token}.
func freshGrant(token int64, ttl time.Duration) (acquireResult, error) {
	if token <= 0 {
		return acquireResult{}, fmt.Errorf("unexpected reply %d from the acquire script", token)
	}
	pttl := time.Duration(min(millis(ttl), MaxTTL.Milliseconds())) * time.Millisecond // as parseAcquire reads it
	return acquireResult{held: true, token: uint64(token), pttl: pttl, counter: uint64(token)}, nil
}

func parseAcquire(v []int64) (acquireResult, error) {
	if len(v) != 4 {
		return acquireResult{}, fmt.Errorf("unexpected reply %v from the acquire script", v)
	}
	r := acquireResult{held: v[0] == 1, token: uint64(v[1]), counter: uint64(v[3])}
	if v[2] > 0 {
		r.pttl = time.Duration(min(v[2], MaxTTL.Milliseconds())) * time.Millisecond
	}
	return r, nil
}

// acquire runs the acquire script, with WAIT on the same connection when
// replicas must acknowledge.
func (d *Driver) acquire(ctx context.Context, ks keyset, owner, hold string, ttl time.Duration) (acquireResult, error) {
	if d.opts.Wait == WaitQueue {
		return d.fairAttempt(ctx, ks, owner, ttl, false, 0, hold, 0)
	}
	keys := []string{ks.lock, ks.fence}
	args := []any{owner, millis(ttl), hold}
	if d.opts.WaitReplicas == 0 {
		return acquireReply(acquireScript.Run(ctx, d.c, keys, args...), ttl)
	}
	var acq *redis.Cmd
	var wait *redis.Cmd
	run := func(sha bool) error {
		_, err := d.c.Pipelined(ctx, func(p redis.Pipeliner) error {
			if sha {
				acq = acquireScript.EvalSha(ctx, p, keys, args...)
			} else {
				acq = acquireScript.Eval(ctx, p, keys, args...)
			}
			wait = p.Do(ctx, "WAIT", d.opts.WaitReplicas, millis(d.opts.WaitTimeout)) // 0 would wait forever
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
		return acquireResult{}, &waitFailedError{err: wait.Err()}
	}
	if err != nil {
		return acquireResult{}, err
	}
	r, err := acquireReply(acq, ttl)
	if err != nil {
		return acquireResult{}, err
	}
	acked, _ := wait.Int64()
	r.acked = int(acked)
	return r, err
}

// waitFailedError is a WAIT that failed after the acquire script it
// followed had run: whatever the error, the script may have granted.
type waitFailedError struct{ err error }

func (e *waitFailedError) Error() string { return "WAIT after the acquire script: " + e.err.Error() }
func (e *waitFailedError) Unwrap() error { return e.err }

// millis is d in whole milliseconds, rounded up so the store never keeps a
// lock for less than asked, and at least 1. It never overflows: the
// portable layer asks for at most backend.TTLLimit, and a duration within
// a millisecond of the largest one saturates instead of wrapping.
func millis(d time.Duration) int64 {
	ms := int64(d / time.Millisecond)
	if d%time.Millisecond != 0 {
		ms++
	}
	return max(1, ms)
}

// subscribeMutex implements backend.Notifier over the driver's one shared
// pub/sub connection.
func (d *Driver) subscribeMutex(ctx context.Context, key string) (<-chan struct{}, func(), error) {
	out := make(chan struct{}, 1)
	cancel, err := d.notify.subscribe(ctx, d.keys(key).channel, out, filter{})
	if err != nil {
		return nil, nil, fmt.Errorf("redislock: subscribe %q: %w: %w", key, backend.ErrUnavailable, err)
	}
	return out, cancel, nil
}
