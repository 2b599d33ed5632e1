package etcdlock

import (
	"context"
	"errors"
	"fmt"
	"math"
	"sync"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/distlock/distlock/backend"
)

// DefaultTTL is the lease TTL when Options.TTL is zero.
const DefaultTTL = 30 * time.Second

// MinTTL is the shortest lease TTL the driver accepts: etcd's minimum lease
// TTL with its default timings (1.5 × the 1 s election timeout), rounded up
// to whole seconds, the unit of etcd lease TTLs.
const MinTTL = 2 * time.Second

// Options configure a Driver. The zero value is valid.
type Options struct {
	// Prefix is the key prefix of every lock ("" means DefaultPrefix). It is
	// made of '/'-separated segments; none may start with '%'.
	Prefix string
	// TTL is the TTL of the driver's lease, which every lock of the driver
	// shares (0 means DefaultTTL). It is rounded up to whole seconds and
	// must be at least MinTTL; the server may grant a longer one.
	TTL time.Duration
}

// Driver is a distlock backend over one etcd client. All locks of a Driver
// live on one etcd lease (its session), kept alive by one goroutine. It
// implements backend.Driver, backend.Waiter, backend.Inspector and
// backend.Batcher (RefreshAll in lock.go, TryAcquireMulti in multi.go).
type Driver struct {
	routes // the entry points (kinds.go)

	c      *clientv3.Client
	own    bool // c was opened by the driver, which closes it
	prefix string
	ttl    time.Duration

	ctx    context.Context // ends at Close; bounds background work
	cancel context.CancelFunc
	wg     sync.WaitGroup

	grantSem chan struct{} // serialises lease grants
	near     int           // how many keys ahead of its own a waiter watches

	mu           sync.Mutex
	sess         *session
	idleWatching bool                  // the idle watch runs (see idlewatch.go)
	watches      map[string]*lockWatch // by watched etcd key (see lockwatch.go)
	held         map[heldKey]*lock
	closed       bool
}

type heldKey struct {
	key   string
	token uint64
}

// New returns a Driver over c, which the caller keeps owning: Close never
// closes it. opts may be nil.
//
// What the driver needs from c: nothing for its deadlines. Every etcd call
// it makes carries a ctx, which the etcd client honours, retries included,
// and the portable layer ends each lease at its own deadline whether or not
// a call is still out; a client made with clientv3.New and only its
// Endpoints passes the conformance suite's stall case. DialTimeout is not
// needed either: a call made while c has no connection waits for one within
// its ctx and then fails with ErrUnavailable. What c should have is gRPC
// keepalive (DialKeepAliveTime and DialKeepAliveTimeout; the clients
// distlock.Open makes use 10 s and 5 s): without it, which is clientv3's
// default, a connection that died without a reset (a NAT or firewall that
// dropped its state, a host gone) keeps every request until the kernel
// gives up on it, about 15 minutes on Linux, and meanwhile every lease ends
// and nothing can be acquired. The driver cannot see c's configuration to
// warn about it. c's logger stays c's: the Locker's logger gets none of
// its messages.
//
// Sharing c with the service's other work: the driver grants its own etcd
// lease and renews it with its own requests (KeepAliveOnce, not c's
// KeepAlive streams), so the service's leases and watches stay apart from
// it; they share c's connections, so heavy traffic delays renewals (whose
// validity counts from their send time: doubt, not a safety loss). Closing
// c under the driver is safe: the driver's calls then fail with ErrClosed,
// its leases end at their deadlines, and its etcd lease, no longer renewed
// and not revoked, expires on the server only after them
// (TestUserClientClosedUnderLocker).
func New(c *clientv3.Client, opts *Options) (*Driver, error) {
	if c == nil {
		return nil, fmt.Errorf("etcdlock: %w: nil client", backend.ErrInvalidConfig)
	}
	var o Options
	if opts != nil {
		o = *opts
	}
	return newDriver(c, false, o)
}

func newDriver(c *clientv3.Client, own bool, o Options) (*Driver, error) {
	prefix, err := normalizePrefix(o.Prefix)
	if err != nil {
		return nil, fmt.Errorf("etcdlock: %w", err)
	}
	ttl, err := leaseTTL(o.TTL)
	if err != nil {
		return nil, fmt.Errorf("etcdlock: %w", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	d := &Driver{
		c: c, own: own, prefix: prefix, ttl: ttl,
		ctx: ctx, cancel: cancel,
		grantSem: make(chan struct{}, 1),
		near:     DefaultNear,
		held:     map[heldKey]*lock{},
	}
	d.routes = byKind.Waiting(d)
	return d, nil
}

// leaseTTL checks and rounds a requested TTL up to whole seconds.
func leaseTTL(ttl time.Duration) (time.Duration, error) {
	if ttl == 0 {
		ttl = DefaultTTL
	}
	if ttl < MinTTL {
		return 0, fmt.Errorf("%w: TTL %v is below etcd's minimum lease TTL %v", backend.ErrInvalidConfig, ttl, MinTTL)
	}
	secs := math.Ceil(ttl.Seconds())
	if secs > math.MaxInt32 {
		return 0, fmt.Errorf("%w: TTL %v is too long", backend.ErrInvalidConfig, ttl)
	}
	return time.Duration(secs) * time.Second, nil
}

// Capabilities reports a fair queue, one lease per driver (session
// lifetime: every lock has the lease's TTL), and Raft replication.
func (d *Driver) Capabilities() backend.Capabilities {
	return backend.Capabilities{
		Name:         "etcd",
		Wait:         backend.WaitQueue,
		Lifetime:     backend.LifetimeSession,
		PerLockTTL:   false,
		MinTTL:       MinTTL,
		MaxTTL:       backend.TTLLimit, // etcd's own limit (9e9 s) is far above
		Fair:         true,
		Replication:  "majority quorum (Raft); linearizable",
		Semaphore:    backend.WaitQueue, // semaphore.go
		RW:           backend.WaitQueue, // rwlock.go
		MultiAtomic:  true,              // multi.go
		BatchRefresh: true,              // lock.go
		Values:       true,              // announce.go
		Watch:        true,
		Inspect:      true,       // inspect.go
		ForceRelease: true,       // force.go
		CtxBounded:   true,       // gRPC honours ctx
		Server:       d.server(), // endpoint.go

		SemaphoreFair: true, // in create-revision order
	}
}

// Client returns the etcd client the driver uses.
func (d *Driver) Client() *clientv3.Client { return d.c }

// Prefix returns the key prefix of the driver's locks, ending with '/'.
func (d *Driver) Prefix() string { return d.prefix }

// KeyRange returns the etcd key range (a prefix) of key's lock: every
// holder and waiter of key puts one key in it.
func (d *Driver) KeyRange(key string) string { return lockRange(d.prefix, key) }

// Close stops the driver's goroutines, revokes its lease if no lock is held
// on it (held locks are abandoned to expire with the lease's TTL), and
// closes the client if the driver opened it.
func (d *Driver) Close() error {
	d.mu.Lock()
	if d.closed {
		d.mu.Unlock()
		return nil
	}
	d.closed = true
	s := d.sess
	d.sess = nil
	d.mu.Unlock()
	d.cancel()
	d.wg.Wait()
	if s != nil && s.held.Len() == 0 && d.c.Ctx().Err() == nil {
		// Best effort: an unrevoked lease just expires with its TTL.
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		_, _ = d.c.Revoke(ctx, s.id)
		cancel()
	}
	var err error
	if d.own {
		err = errors.Join(err, d.c.Close())
	}
	return err
}

// isClosed reports whether Close was called, or the client was closed.
func (d *Driver) isClosed() bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.closed || d.c.Ctx().Err() != nil
}

// An ekey is the etcd key of one acquisition of a lock key.
type ekey struct {
	key  string // the user's key
	name string // the etcd key
	slot uint64 // its name slot in the session (see takeSlot)
}

// nextKey returns the etcd key of an acquisition of key in session s.
func (d *Driver) nextKey(key string, s *session) ekey {
	slot := s.takeSlot(key)
	return ekey{key: key, name: fmt.Sprintf("%s%x.%x", lockRange(d.prefix, key), int64(s.id), slot), slot: slot}
}
