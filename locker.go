package distlock

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/distlock/distlock/backend"
)

// A Locker takes distributed locks through one backend driver. It is safe
// for concurrent use; make one per process and store and share it.
//
// A Locker counts re-entries, renews its leases (one watchdog goroutine for
// all of them), tracks each lease's validity, and reports losses. Close ends
// every lease and stops every goroutine it started.
type Locker struct {
	d        backend.Driver
	caps     backend.Capabilities
	waiter   backend.Waiter   // nil unless some kind queues (Capabilities.WaitFor)
	notifier backend.Notifier // nil unless the store announces releases (and withdraws writer-waiting marks)
	batch    backend.Batcher  // nil unless the store refreshes many locks in one round trip
	multi    backend.Batcher  // nil unless the store takes several keys in one step
	bounded  bool             // the driver's calls return by their ctx's end (Capabilities.CtxBounded): no hand-off
	cfg      lockerConfig
	maxKey   int
	tel      *telemetry  // observe.go
	events   *eventQueue // event.go

	closeCtx    context.Context // canceled by Close: ends waits
	closeCancel context.CancelCauseFunc
	ops         sync.WaitGroup // acquisitions in flight
	bg          sync.WaitGroup // watchdog, event plumbing
	calls       sync.WaitGroup // driver calls that may outlive their ctx: renewals, background and abandoned releases, refreshes a caller gave up on
	callsMu     sync.Mutex     // guards callsDone
	callsDone   bool           // Close waits for calls: later ones are not tracked

	mu        sync.Mutex
	closed    bool
	holds     map[holdKey]*hold
	wd        watchdog
	binds     []context.CancelCauseFunc // operations bound to Close (bindClose); nil: a free slot
	freeBinds []int                     // the free slots of binds
}

// New returns a Locker over d. The Locker owns d: Close closes it. It
// panics if d's capabilities contradict the interfaces it implements or an
// option is impossible (both are programming errors); Open reports those as
// errors instead.
func New(d backend.Driver, opts ...LockerOption) *Locker {
	l, err := newLocker(d, opts)
	if err != nil {
		panic(err)
	}
	return l
}

func newLocker(d backend.Driver, opts []LockerOption) (*Locker, error) {
	if d == nil {
		return nil, errors.New("distlock: New: nil driver")
	}
	cfg := defaultLockerConfig()
	for _, o := range opts {
		o(&cfg)
	}
	if err := cfg.check(); err != nil {
		return nil, err
	}
	caps := d.Capabilities()
	if err := caps.Check(d); err != nil {
		return nil, err
	}
	caps = caps.Offers(d)
	l := &Locker{d: d, caps: caps, cfg: cfg, maxKey: MaxKeyLen, holds: map[holdKey]*hold{}}
	if caps.MaxKeyLen > 0 && caps.MaxKeyLen < l.maxKey {
		l.maxKey = caps.MaxKeyLen
	}
	l.waiter, _ = d.(backend.Waiter)
	l.notifier, _ = d.(backend.Notifier)
	l.bounded = caps.CtxBounded
	if caps.BatchRefresh {
		l.batch = d.(backend.Batcher)
	}
	if caps.MultiAtomic {
		l.multi = d.(backend.Batcher)
	}
	// A default TTL the store cannot honour would fail every acquisition
	// made without WithTTL: refuse it now.
	if err := l.checkTTLBounds(cfg.ttl); err != nil {
		return nil, fmt.Errorf("default TTL (WithDefaultTTL, or the URL's ttl): %w", err)
	}
	if lg, ok := d.(backend.Logging); ok {
		lg.SetLogger(cfg.logger)
	}
	l.tel = newTelemetry(cfg, caps.Name, caps.Server)
	l.events = newEventQueue(l.deliver)
	l.closeCtx, l.closeCancel = context.WithCancelCause(context.Background())
	l.wd.init()
	return l, nil
}

// Open returns a Locker for the backend named by rawURL's scheme (redis,
// rediss, mysql, postgres, zk, etcd, mem, ...), which must have been registered by
// importing its package, e.g. import _ "github.com/distlock/distlock/memlock".
//
// The URL parameter ttl (e.g. ?ttl=10s) sets the default lease TTL for every
// backend; the backend reads the rest, and any parameter nobody reads is an
// error. ctx bounds the connection attempt, not the Locker's life. Errors
// never contain the URL's password.
func Open(ctx context.Context, rawURL string, opts ...LockerOption) (*Locker, error) {
	u, err := backend.ParseURL(rawURL)
	if err != nil {
		return nil, fmt.Errorf("distlock: open: %w", err)
	}
	open, err := backend.Lookup(u.Scheme)
	if err != nil {
		return nil, fmt.Errorf("distlock: open: %w", err)
	}
	ttl := u.Query.Duration("ttl", 0)
	if ttl != 0 {
		opts = append([]LockerOption{WithDefaultTTL(ttl)}, opts...)
	}
	d, err := open(ctx, u)
	if err != nil {
		return nil, fmt.Errorf("distlock: open %s: %w", u.Redacted(), err)
	}
	if err := u.Query.Err(); err != nil {
		_ = d.Close()
		return nil, fmt.Errorf("distlock: open %s: %w", u.Redacted(), err)
	}
	l, err := newLocker(d, opts)
	if err != nil {
		_ = d.Close()
		return nil, fmt.Errorf("distlock: open %s: %w", u.Redacted(), err)
	}
	return l, nil
}

// Capabilities describes the backend: how it waits, what keeps a lock
// alive, fairness, reentrancy across processes.
func (l *Locker) Capabilities() backend.Capabilities { return l.caps }

// Driver returns the backend driver, for optional interfaces such as
// backend.Inspector.
func (l *Locker) Driver() backend.Driver { return l.d }

// Acquire takes the lock named key, waiting while another owner holds it,
// until ctx ends. ctx bounds only the wait: the lease lives until Release,
// loss, or Close. If ctx carries an owner (a Lease.Context, or
// ContextWithOwner) or WithOwner is given and that owner holds key, Acquire
// re-enters: it returns a new Lease sharing the hold and its token, and the
// lock is freed when every such Lease is released.
//
// When ctx ends first, the error wraps ctx's error (and the store's last
// error if it was unreachable), and nothing of this attempt stays queued or
// held in the store. If this client's own session or lease ends while it
// waits (ZooKeeper, etcd), the error matches ErrLost: the place in line was
// lost, and no lease was granted.
func (l *Locker) Acquire(ctx context.Context, key string, opts ...Option) (*Lease, error) {
	return l.acquire(ctx, key, opts, true)
}

// TryAcquire makes one attempt to take key. If another owner holds it, it
// returns an error matching ErrNotAcquired at once and leaves nothing
// behind in the store. If the store does not answer before ctx's deadline,
// the error matches both ErrUnavailable and context.DeadlineExceeded; if
// ctx is canceled while the attempt is in flight, the error wraps ctx's
// cause and not ErrUnavailable (the caller ended it), whatever the store
// client made of the cancel; if its grant arrives after the lease's validity would have run out (a reply
// slower than the TTL), the lock is given back and the error matches
// ErrUnavailable. Acquire tries again in that case.
// Reentry works as for Acquire.
func (l *Locker) TryAcquire(ctx context.Context, key string, opts ...Option) (*Lease, error) {
	return l.acquire(ctx, key, opts, false)
}

// Do acquires key (waiting as Acquire does), runs fn with a context that is
// canceled the moment the lease is lost, and releases the lease when fn
// returns, with its own timeout (WithReleaseTimeout) so a canceled ctx
// cannot leave the lock behind. It returns fn's error joined with the
// lease's error if it was lost, or with the release error.
func (l *Locker) Do(ctx context.Context, key string, fn func(ctx context.Context) error, opts ...Option) error {
	le, err := l.Acquire(ctx, key, opts...)
	if err != nil {
		return err
	}
	return l.runHeld(ctx, le, fn)
}

// runHeld runs fn under le (a Lease, or any Held) and releases le
// afterwards with its own timeout, even if fn panics.
func (l *Locker) runHeld(ctx context.Context, le Held, fn func(ctx context.Context) error) (err error) {
	defer func() {
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), l.cfg.releaseTimeout)
		defer cancel()
		err = errors.Join(err, le.Release(rctx))
	}()
	return fn(le.Context())
}

// Close ends every lease: each is released (each release bounded by
// WithReleaseTimeout, a few dozen at a time) or, once the store has
// answered no release for that long, abandoned to expire. Close renews
// no lease: one whose validity runs out before its release is sent is
// lost then (Err matches ErrLost, Done is closed), as it would be without
// Close. Waiting acquisitions return ErrClosed. Close returns after every goroutine the
// Locker started has exited and every event (WithEvents) has been
// delivered, and closes the driver. Later calls return ErrClosed.
func (l *Locker) Close() error {
	l.mu.Lock()
	if l.closed {
		l.mu.Unlock()
		return fmt.Errorf("distlock: close: %w", ErrClosed)
	}
	l.closed = true
	l.wd.close()
	l.mu.Unlock()

	l.closeCancel(ErrClosed)
	l.cancelBound()
	l.ops.Wait()

	l.mu.Lock()
	var held []*hold
	for _, h := range l.holds {
		if h.state == holdHeld {
			held = append(held, h)
		}
	}
	l.mu.Unlock()
	errs := l.releaseAll(held, fmt.Errorf("distlock: locker closed: %w", ErrReleased))
	close(l.wd.stop) // every hold has ended: nothing left to expire
	l.bg.Wait()
	// Driver calls still out (background releases, renewals and calls a
	// caller gave up on) may finish within the release timeout; a store
	// client that ignores ctx may hold them longer, until the driver is
	// closed. Every hold has ended: their answers change nothing.
	l.callsMu.Lock()
	l.callsDone = true
	l.callsMu.Unlock()
	calls := make(chan struct{})
	go func() { l.calls.Wait(); close(calls) }()
	t := time.NewTimer(l.cfg.releaseTimeout)
	select {
	case <-calls:
	case <-t.C:
	}
	t.Stop()
	l.events.close()
	for i, err := range errs {
		errs[i] = ignoreExpected(err) // each on its own: one lock found gone must not hide another's failure
	}
	errs = append(errs, l.d.Close())
	<-calls
	return errors.Join(errs...)
}
