// Package distlock is a distributed lock with one API over Redis,
// MySQL/MariaDB, PostgreSQL, ZooKeeper and etcd (and an in-process store
// for tests).
//
//	locker, err := distlock.Open(ctx, "redis://127.0.0.1:6379/0?ttl=30s")
//	...
//	defer locker.Close()
//	err = locker.Do(ctx, "reports/daily", func(ctx context.Context) error {
//		return build(ctx) // ctx is canceled the moment the lock is lost
//	})
//
// A [Locker] takes locks through one backend; [Locker.Acquire] waits,
// [Locker.TryAcquire] makes one attempt, [Locker.Do] wraps a function. Each
// returns or uses a [Lease]: the held lock, with its fencing token
// ([Lease.Token]), a channel closed when it ends ([Lease.Done]) and the
// reason ([Lease.Err]).
//
// # URLs
//
// [Open] picks the backend by the URL's scheme; import the backend package
// to register it:
//
//	mem://[name]                                  github.com/distlock/distlock/memlock
//	redis://[user:pass@]host:6379[,host...]/db    github.com/distlock/distlock/redislock
//	rediss://...                                  (TLS)
//	mysql://user:pass@host:3306/db?table=...      github.com/distlock/distlock/sqllock
//	postgres://user:pass@host:5432/db?sslmode=... github.com/distlock/distlock/sqllock
//	zk://host:2181[,host...]/base                 github.com/distlock/distlock/zklock
//	etcd://host:2379[,host...]/prefix             github.com/distlock/distlock/etcdlock
//
// The parameter ttl sets the default lease TTL on every backend; the rest
// are the backend's own (docs/configuration.md). Unknown parameters are
// errors, and no error shows a password (nor any part of input that is
// not a URL, such as a libpq "host=... password=..." string). [New] takes
// a driver made directly, e.g. redislock.New(client, nil).
//
// # Semantics
//
//   - Mutual exclusion per key, and a fencing token per grant that is
//     greater than every earlier token for that key, on every backend,
//     except where the store itself forgets (a Redis failover or restart
//     without persistence can repeat a token: docs/safety.md). Pass it to
//     the resource you protect, which rejects a token lower than the last
//     it accepted, and an equal one from another owner.
//   - While held, a lease is renewed every TTL/3 by one watchdog goroutine
//     per Locker. It is valid until (send time of its last successful
//     renewal) + TTL − drift; when that passes without a renewal it is
//     lost. Where the store frees a lock only by its TTL or session
//     timeout, that is before the store can grant the lock to anyone
//     else; where it frees it at once (a SQL connection killed, a server
//     restarted, an operator deleting the lock) the holder learns at its
//     next renewal, and only the fencing token protects the resource
//     meanwhile. Between a failed renewal and the deadline, [Lease.State]
//     is [StateInDoubt].
//   - Reentrancy by owner: [Lease.Context] (or [ContextWithOwner], or
//     [WithOwner]) makes Acquire re-enter a lock its owner holds; the lock is
//     freed when every re-entry is released. A re-entry never shortens the
//     lease.
//   - Waits honour their ctx; a wait that gives up leaves nothing queued in
//     the store. [Locker.Close] ends every lease and goroutine.
//
// What each store can promise under crashes and failover differs; see
// docs/safety.md and the backend's package documentation.
//
// # Leader election and multi-lock
//
// [Locker.Election] makes a candidate of an election: [Election.Campaign]
// blocks until it leads and returns a [Leadership] whose term is a fencing
// token and which ends as a lease does; [Election.Leader] and
// [Election.Observe] say who leads (Observe pushed by the store where its
// driver watches: memlock, ZooKeeper, etcd), and [Leadership.Proclaim]
// changes the leader's value in the same term (memlock, Redis, ZooKeeper,
// etcd). [Locker.AcquireAll] takes several keys
// in one global order, all or none, as one [MultiLease]. Both are built on
// the mutex and so work on every backend; a store that takes several keys
// in one atomic step (Capabilities.MultiAtomic: mem, Redis single, etcd)
// takes a multi-lock's keys in that step first. See docs/primitives.md.
//
// A [Lease], a [MultiLease] and a [Leadership] each end as a lease does,
// with the same methods: [Held] is that surface (Owner, Done, Err,
// Context, State, Deadline, Refresh, Release), for helpers that serve all
// three. A Leadership's Release is its Resign.
//
// # Read-write locks
//
// [Locker.RWMutex] is a read-write lock: [RWMutex.RLock] for many readers,
// [RWMutex.Lock] for one writer, each returning a [Lease]. A waiting
// writer keeps new readers out; read-to-write upgrade is refused with
// [ErrUpgrade]. Only stores with native read-write locks offer it (mem,
// Redis single and Cluster, ZooKeeper, etcd, MySQL/MariaDB, PostgreSQL);
// others report
// [ErrUnsupported]. See docs/primitives.md.
//
// # Semaphores
//
// [Locker.Semaphore] is a counting semaphore of a given limit:
// [Semaphore.Acquire] and [Semaphore.AcquireN] take one or n permits as
// one [Lease] (all or none) with a fencing token of its own, renewed and
// reported lost as a lock's lease is. Native on mem, Redis single and
// Cluster, etcd, ZooKeeper and SQL (MySQL/MariaDB, PostgreSQL row mode);
// Redlock and the others report [ErrUnsupported]. See docs/primitives.md.
//
// # Observability
//
// A Locker reports through the OpenTelemetry API ([WithMeterProvider],
// [WithTracerProvider]; the global providers by default): acquisitions by
// outcome, wait and hold times, renewals, leases in doubt, restored and
// lost, store errors, and a span per Acquire, TryAcquire and Release under
// the caller's span. Keys are recorded only with [WithKeyAttribute].
// [WithEvents] calls a function of yours at each change of a lease's state.
// See docs/observability.md.
//
// # Errors
//
// Errors match the sentinels with errors.Is: [ErrNotAcquired],
// [ErrNotHeld], [ErrLost], [ErrReleased], [ErrClosed], [ErrInvalidKey],
// [ErrInvalidConfig], [ErrUnavailable], [ErrUnsupported], and for elections
// [ErrNoLeader] and [ErrCampaigning]. The store's own
// error is wrapped too, for errors.As.
package distlock

// The files of the package, read top to bottom (API, engine, telemetry,
// vocabulary), with what each holds: docs/architecture.md, "What lives
// where".
