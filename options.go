package distlock

import (
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/distlock/distlock/backend"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/trace"
)

// Options come in three types, one per thing configured and when:
// LockerOption for New and Open (the Locker's defaults, logging and
// telemetry, for its life), Option for each acquisition (Acquire, the
// primitives' acquisitions, AcquireAll), and ElectionOption for
// Locker.Election (the election's lock and how Observe reads it). They
// are separate types so that an option given where it means nothing (a
// logger to Acquire, an owner to an Election, whose owner is its
// candidate's) does not compile.

// DefaultTTL is the lease TTL when neither WithTTL nor WithDefaultTTL (nor a
// ttl URL parameter) says otherwise. It is the TTL Redisson uses: long
// enough that a paused holder rarely loses its lock, short enough that a
// crashed holder's lock frees within half a minute.
const DefaultTTL = 30 * time.Second

// LockerOption configures a Locker.
type LockerOption func(*lockerConfig)

type lockerConfig struct {
	ttl            time.Duration
	driftFactor    float64
	driftFixed     time.Duration
	releaseTimeout time.Duration
	releaseInline  bool // WithReleaseOnCaller
	logger         *slog.Logger
	meters         metric.MeterProvider
	tracers        trace.TracerProvider
	keyLabel       func(key string) string
	events         func(Event)
	errs           []error // options refused when applied (check reports them)
}

func defaultLockerConfig() lockerConfig {
	return lockerConfig{
		ttl:            DefaultTTL,
		driftFactor:    0.01,
		driftFixed:     2 * time.Millisecond,
		releaseTimeout: 5 * time.Second,
		logger:         slog.New(slog.DiscardHandler),
		meters:         otel.GetMeterProvider(),
		tracers:        otel.GetTracerProvider(),
	}
}

// WithDefaultTTL sets the TTL of leases acquired without WithTTL (or with
// WithTTL(0)). Zero keeps DefaultTTL. A TTL the store cannot honour (below
// its Capabilities.MinTTL, above its MaxTTL) is refused when the Locker is
// made: Open returns ErrInvalidConfig, New panics.
func WithDefaultTTL(ttl time.Duration) LockerOption {
	return func(c *lockerConfig) {
		if ttl != 0 {
			c.ttl = ttl
		}
	}
}

// WithClockDrift sets the margin by which a lease's client-side validity is
// shorter than its TTL: factor×TTL + fixed (default 0.01×TTL + 2ms, as in
// Redlock). The margin covers clock-rate differences between this process
// and the store; a lease is reported lost once TTL − margin has passed since
// its last successful acquire or renewal was sent. factor must be a number
// in [0, 0.5) and fixed in [0, backend.TTLLimit/2); New refuses anything
// else (NaN, ±Inf, negative) with an error matching ErrInvalidConfig, as
// it does a TTL the margin leaves no validity.
func WithClockDrift(factor float64, fixed time.Duration) LockerOption {
	return func(c *lockerConfig) {
		c.driftFactor, c.driftFixed = factor, fixed
	}
}

// WithReleaseTimeout bounds each release that Do and Close make on their
// own (default 5s; zero keeps it, a negative one is refused). Close
// releases many leases a few dozen at a time, each within this timeout,
// and gives up on those not yet sent once the store has answered none for
// this long.
func WithReleaseTimeout(d time.Duration) LockerOption {
	return func(c *lockerConfig) {
		switch {
		case d > 0:
			c.releaseTimeout = d
		case d < 0:
			c.errs = append(c.errs, fmt.Errorf("%w: WithReleaseTimeout(%v): the timeout is negative", ErrInvalidConfig, d))
		}
	}
}

// WithReleaseOnCaller makes a Release call the driver on the caller's
// goroutine, whatever its ctx: no goroutine hand-off per release (on a
// busy 2-core machine the hand-off is most of the gap between distlock's
// uncontended pair on Redis and a fenced floor's: docs/benchmarks, session
// 15). The price is the bound on Release's return: by default a Release
// whose ctx ends before the store answers returns at once (the lease has
// ended all the same; the lock expires by its TTL if the release never
// arrives); with this option it returns when the driver does, which for a
// store client that ignores ctx is later: go-redis ignores a ctx's
// cancellation always and its deadline unless ContextTimeoutEnabled (the
// Redis driver then still returns by a deadline itself, on a goroutine of
// its own), so a cancelled Release waits up to the client's ReadTimeout.
// Nothing else changes: renewals, their bound and the lease's deadline
// (the loss bound), fencing, fairness and retry-safety are the default's.
// A ctx that cannot end (context.Background) never costs a hand-off, nor
// does a driver that returns by its ctx's end itself (backend.Capabilities.CtxBounded:
// etcdlock, zklock), whose Release and Refresh the Locker always calls on
// the caller's goroutine; the option matters for the others (Redis, SQL).
func WithReleaseOnCaller() LockerOption {
	return func(c *lockerConfig) { c.releaseInline = true }
}

// WithLogger sets the logger for the Locker and its driver (default:
// nothing is logged). Each change of a lease's state is one line, with the
// key, the owner (shortened) and the token: in doubt (WARN), held again
// (INFO), lost (WARN), acquired and released (DEBUG); a renewal that fails
// again while in doubt is DEBUG.
// A driver that logs (backend.Logging) logs through it too.
func WithLogger(l *slog.Logger) LockerOption {
	return func(c *lockerConfig) {
		if l != nil {
			c.logger = l
		}
	}
}

// WithMeterProvider sets where the Locker's metrics go (default: the
// global provider, otel.GetMeterProvider(), which records nothing until
// the program sets one). docs/observability.md lists the instruments.
func WithMeterProvider(mp metric.MeterProvider) LockerOption {
	return func(c *lockerConfig) {
		if mp != nil {
			c.meters = mp
		}
	}
}

// WithTracerProvider sets where the Locker's spans go (default: the global
// provider, otel.GetTracerProvider()). Acquire, TryAcquire and Release
// make a span that is a child of the span in their ctx; a lease's doubt
// and loss, which happen after Acquire has returned, make spans of their
// own linked to the acquisition's (docs/observability.md).
func WithTracerProvider(tp trace.TracerProvider) LockerOption {
	return func(c *lockerConfig) {
		if tp != nil {
			c.tracers = tp
		}
	}
}

// WithKeyAttribute adds the attribute distlock.key, with the value
// label(key), to the Locker's metrics and spans; an empty label leaves the
// key out. Without it no key is recorded: keys can be numerous (every key
// is a new time series for a metrics backend to keep) and may name
// customers, files or accounts. Map keys to a few classes (a prefix, say)
// rather than recording them whole. label is called once per acquisition,
// without the Locker's lock held; it must be safe for concurrent use.
func WithKeyAttribute(label func(key string) string) LockerOption {
	return func(c *lockerConfig) { c.keyLabel = label }
}

// WithEvents calls fn with every change in a lease's life: acquired, in
// doubt, restored, lost, released (see Event). A later WithEvents replaces
// an earlier one; nil turns events off.
//
// fn is called on one goroutine per Locker, in the order the changes
// happened, never with the Locker's lock held: it may call the Locker and
// its Leases (but not Close, which waits for queued events). The Locker
// never waits for fn, so a slow fn delays later events, not locking; keep
// it quick and hand long work (paging, draining) to a goroutine of yours.
// Close returns after every event has been delivered.
func WithEvents(fn func(Event)) LockerOption {
	return func(c *lockerConfig) { c.events = fn }
}

// maxDriftFixed bounds WithClockDrift's fixed margin: one of half the
// longest TTL leaves no TTL any validity, and keeps the margin's
// arithmetic (factor×TTL + fixed) far from overflow.
const maxDriftFixed = backend.TTLLimit / 2

func (c lockerConfig) check() error {
	if len(c.errs) > 0 {
		return errors.Join(c.errs...)
	}
	if c.ttl < 0 {
		return fmt.Errorf("%w: WithDefaultTTL(%v): default TTL %v is negative", ErrInvalidConfig, c.ttl, c.ttl)
	}
	if c.ttl > backend.TTLLimit {
		return fmt.Errorf("%w: WithDefaultTTL(%v): default TTL %v is above the maximum of %v", ErrInvalidConfig, c.ttl, c.ttl, backend.TTLLimit)
	}
	// Written so that NaN fails: every comparison with NaN is false.
	if !(c.driftFactor >= 0 && c.driftFactor < 0.5) || !(c.driftFixed >= 0 && c.driftFixed < maxDriftFixed) {
		return fmt.Errorf("%w: WithClockDrift(%v, %v): clock drift factor %v must be a number in [0, 0.5) and fixed margin %v in [0, %v)",
			ErrInvalidConfig, c.driftFactor, c.driftFixed, c.driftFactor, c.driftFixed, maxDriftFixed)
	}
	if c.releaseTimeout <= 0 {
		return fmt.Errorf("%w: WithReleaseTimeout(%v): the timeout must be positive", ErrInvalidConfig, c.releaseTimeout)
	}
	return nil
}

// drift returns the validity margin for ttl.
func (c lockerConfig) drift(ttl time.Duration) time.Duration {
	return time.Duration(float64(ttl)*c.driftFactor) + c.driftFixed
}

// Option configures one acquisition.
type Option func(*acquireConfig)

type acquireConfig struct {
	ttl      time.Duration
	owner    string
	noRenew  bool
	ownerErr error
}

// applyOptions returns the acquireConfig opts make. Without options it
// allocates nothing (options write through a pointer, which escapes).
func applyOptions(opts []Option) acquireConfig {
	if len(opts) == 0 {
		return acquireConfig{}
	}
	c := new(acquireConfig)
	for _, o := range opts {
		o(c)
	}
	return *c
}

// WithTTL sets the lease's TTL: how long the store keeps the lock if this
// process stops renewing it (it crashed, or WithoutAutoRenew). While the
// lease is held it is renewed every TTL/3. Stores whose lifetime is a
// session (ZooKeeper, etcd with a shared lease) use their session's TTL
// instead; see backend.Capabilities.PerLockTTL. Zero means the Locker's
// default TTL (WithDefaultTTL, the URL's ttl, else DefaultTTL), as when
// WithTTL is not given; a negative TTL, or one outside the store's
// Capabilities.MinTTL and MaxTTL, is refused with ErrInvalidConfig.
func WithTTL(ttl time.Duration) Option {
	return func(c *acquireConfig) { c.ttl = ttl }
}

// WithOwner acquires as the given owner instead of a fresh random one (or
// the one carried by ctx). Acquisitions with the same owner re-enter the
// lock: in this Locker always, and across Lockers and processes where the
// store supports it (backend.Capabilities.CrossProcessReentry). Owner ids
// are 1 to 128 printable bytes; pick unguessable ones, such as a trace id.
func WithOwner(owner string) Option {
	return func(c *acquireConfig) {
		c.owner = owner
		c.ownerErr = checkOwner(owner)
	}
}

// WithoutAutoRenew turns the watchdog off for this lease: it lives for its
// TTL unless Refresh extends it, and is reported lost (Done closes, Err
// returns ErrLost) once its validity runs out.
func WithoutAutoRenew() Option {
	return func(c *acquireConfig) { c.noRenew = true }
}

// ElectionOption configures an Election.
type ElectionOption func(*Election)

// WithLeaderTTL sets the TTL of the leader's lease (WithTTL for the lock
// behind the election): how long the store keeps a crashed leader in
// office. Zero keeps the Locker's default TTL; a negative TTL, or one above
// the backend's maximum, is refused by Election (ErrInvalidConfig).
func WithLeaderTTL(ttl time.Duration) ElectionOption {
	return func(e *Election) {
		switch {
		case ttl < 0:
			e.refuse(fmt.Errorf("%w: WithLeaderTTL(%v): the TTL is negative", ErrInvalidConfig, ttl))
		case ttl > e.l.maxTTL():
			e.refuse(fmt.Errorf("%w: WithLeaderTTL(%v): the TTL is above the %s backend's maximum of %v", ErrInvalidConfig, ttl, e.l.caps.Name, e.l.maxTTL()))
		case ttl != 0:
			e.opts = append(e.opts, WithTTL(ttl))
		}
	}
}

// WithObserveInterval sets how often Observe reads who leads when it
// polls (default 1s; zero keeps it, a negative interval is refused by
// Election with ErrInvalidConfig): always on a store that does not push
// the changes of a lock's holder (backend.Capabilities.Watch), and on one
// that does only while its watch is down. Polling, a resignation is seen
// sooner where the store announces releases (backend.Notifier), and a
// crashed leader's successor within this interval of taking office.
func WithObserveInterval(d time.Duration) ElectionOption {
	return func(e *Election) {
		switch {
		case d > 0:
			e.interval = d
		case d < 0:
			e.refuse(fmt.Errorf("%w: WithObserveInterval(%v): the interval is negative", ErrInvalidConfig, d))
		}
	}
}

// refuse records the first option Election refuses.
func (e *Election) refuse(err error) {
	if e.err == nil {
		e.err = err
	}
}

// defaultObserveInterval is how often Observe reads the leader by default.
const defaultObserveInterval = time.Second
