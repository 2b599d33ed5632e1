// Package backend is the contract between the portable distlock API and the
// stores that hold locks (Redis, MySQL/MariaDB, ZooKeeper, etcd, memory).
//
// Users of distlock do not need this package, except to write a driver. A
// driver implements [Driver]: one attempt to take a lock, nothing more. The
// portable layer (package distlock) owns everything every store shares: key
// validation, owner ids, reentrancy counting, the renewal watchdog, the
// client-side validity deadline, loss reporting, waiting with backoff, and
// retries. A driver holds only its store's atomic protocol.
//
// # One request shape
//
// Every primitive is a [Kind] of [Request]: the mutex ([Exclusive]), the
// sides of a read-write lock ([Read], [Write]), permits of a counting
// semaphore ([Permits]). One [Driver.TryAcquire] serves them all, and each
// optional interface ([Waiter], [Notifier], [Inspector]) takes the kind
// with the request, so a new primitive adds a Kind, not a family of
// interfaces. A driver declares per kind whether it grants it and how its
// waiters wait ([Capabilities.WaitFor]); a kind it does not grant is
// refused with [ErrUnsupported] by the portable layer before the driver
// sees it, and by the driver itself ([UnsupportedKind]) if it is asked
// anyway.
//
// # Waiting
//
// Stores wait in different ways, per kind, and the contract lets each do
// it its own way instead of faking all of them as a try-loop:
//
//   - poll: the portable fallback, which needs only [Driver.TryAcquire];
//     the portable layer retries with jittered backoff, bounded by the
//     holder's remaining TTL when the driver reports it in a
//     [NotAcquiredError]. A writer's retries carry [Request.Waiting], and a
//     store that keeps a writer-waiting mark for them removes it when the
//     wait gives up ([Notifier.Withdraw]).
//   - notify: the driver also implements [Notifier] (Redis wait=notify); the
//     portable layer subscribes before its last re-check and sleeps until a
//     release is announced or the holder's TTL runs out.
//   - queue: the driver implements [Waiter] and owns the whole wait, because
//     its store keeps a line of waiters (ZooKeeper sequential nodes, etcd
//     create revisions, the Redis queue that a release hands the lock on
//     from) or blocks in the server (SQL SELECT ... FOR UPDATE on
//     a pinned connection). A waiter that gives up removes its place in line.
//
// # Lifetimes
//
// A held lock ends when its TTL runs out ([LifetimeTTL], renewed by
// [Lock.Refresh]), when the store's session ends ([LifetimeSession]), or when
// the connection that holds it closes ([LifetimeConnection]). In every case
// the portable layer calls Refresh at a third of the TTL as a liveness check
// and declares a lease lost when its client-side validity runs out, so a
// holder learns of a loss before the store can expire the lock and grant
// it to another. A store that frees a lock at once (a SQL connection
// closed, a server restarted, an operator deleting the lock) is the
// exception: the holder learns at its next Refresh, or when the driver
// pushes OnLost.
// A driver that learns of trouble first may push it: [Request.OnLost] ends
// the lease at once, [Request.OnDoubt] puts it in doubt with the time the
// driver can still vouch for, and [Request.OnRestored] asks for a re-check
// when contact is back.
//
// # Registry
//
// Each driver package registers an [Opener] for its URL schemes with
// [Register], from its init function; opening is lazy, so importing a driver
// dials nothing. distlock.Open looks the scheme up with [Lookup].
package backend
