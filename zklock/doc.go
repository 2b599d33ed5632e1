// Package zklock is the ZooKeeper backend of distlock: a fair, herd-free
// lock queue of ephemeral sequential nodes, one ZooKeeper session per
// driver shared by all its locks.
//
// Import it for its side effect to make zk:// and zks:// (TLS) URLs work
// with distlock.Open, or build a driver over your own connection with [New]
// (dialled with [TLSDialer] for TLS).
//
// # URLs
//
//	zk://[user:password@]host1:2181,host2:2181/base/path?session_timeout=10s&acl=creator
//
// Hosts default to port 2181. The path is the node under which every lock
// lives (default /distlock); it and its ancestors are created on first use.
// Parameters:
//
//   - session_timeout: the session timeout asked of the server (default
//     10s). The server grants a value between its minSessionTimeout and
//     maxSessionTimeout (2 and 20 ticks by default); every lease is vouched
//     for 5/12 of the granted value after each check (see Semantics).
//   - connect_timeout: how long Open waits for the first session (default
//     10s, also bounded by Open's ctx).
//   - acl: "open" (world:anyone:all, the default without credentials),
//     "creator" (only the URL's user, the default with credentials), or
//     "creator-read" (the URL's user may do anything, everyone may read).
//   - zks:// only: tls_ca, tls_cert, tls_key, tls_server_name,
//     tls_insecure_skip_verify, as for rediss:// and etcds://. The servers
//     must serve TLS on the port given (ZooKeeper's secureClientPort).
//
// A user and password in the URL add digest authentication to the session
// (AddAuth "digest" user:password). Passwords never appear in errors.
//
// # Semantics
//
// A lock on key K is a queue of EPHEMERAL_SEQUENTIAL nodes under
// BASE/enc(K), a container node (persistent on servers older than 3.5,
// removed after the last release instead). Each node's name carries a random
// id (_c_<32 hex>-lock-<seq>), so a create whose reply was lost on a
// connection drop is found again and reused or removed, never orphaned. The
// node with the lowest sequence number holds the lock; every other waiter
// watches only its immediate predecessor, so a release wakes exactly one
// waiter (no herd) and waiters are served in arrival order.
//
// Keys are encoded into one path segment: ASCII letters, digits, '-' and
// '_' stay, every other byte becomes %XX, so "/", ".", "..", Unicode and
// control characters never reach a path raw and distinct keys never share a
// node.
//
// Locks live as long as the driver's session. A Refresh is a Sync and an
// Exists proving the session is alive and the node still ours (the Sync
// makes a follower catch up with the leader first, so a follower cut off
// from the leader cannot renew a lease from a stale copy). The TTL of
// every lease (Capabilities.PerLockTTL is false) is 5/12 of the session
// timeout T the server granted: how long after a check the session surely
// lives. A follower touches the session on the leader only in its replies
// to the leader's pings, so a follower cut off from the leader right after
// answering a renewal may let the leader expire the session as early as
// T/3 (the client's ping interval) plus tickTime/2 (at most T/2) before
// the renewal's send time plus T; the portable layer renews every third of
// the TTL (5T/36). When the connection drops, the driver reports every
// lease of the session in doubt at once (backend.Request.OnDoubt), vouched
// for until the last contact with the server plus 5/12 of T;
// the portable layer declares a lease lost at that instant (minus a drift
// margin) unless the session comes back first, so before the server can
// expire the session and hand the lock on. A reconnect within the session
// keeps every lock: the driver reports contact restored and the lease is
// held again after one refresh. When the server reports the session
// expired, every held lock is reported lost at once and waiters fail with
// ErrLost. On a connection passed to New, whose events belong to its
// owner, the driver polls the connection's state instead (a twentieth of
// the session timeout apart) and keeps the deadline of the last renewal.
// A lock node deleted behind its holder's back is found by the next
// renewal (5/36 of the session timeout). A round of renewals (backend.
// Batcher's RefreshAll) costs a Sync and one Exists for the whole session,
// plus one read per node that changed: every node renewed once carries a
// data watch, whose event ZooKeeper sends before the Exists' answer if the
// node was deleted first; after a reconnect the next round reads every
// node itself. On a connection passed to New that takes
// Options.WatchRenewals (without it, one Exists per lease), since the
// driver sees its reconnects there only by polling.
//
// The fencing token is the lock node's czxid: the zxid of the transaction
// that created it, global to the ensemble and increasing across parent
// cleanup, leader changes and restarts (unlike the sequence suffix, which
// is per parent and restarts when the parent is removed). The create is a
// multi that also sets the parent's data, whose reply carries that zxid,
// so an uncontended acquire+release is three requests, as with zk.Lock:
// create, list the queue, delete.
//
// Semaphores (distlock.Locker.Semaphore) are native: every acquisition is
// an ephemeral sequential node under BASE/sem.enc(K) whose name carries its
// permits and limit (_c_<32 hex>-sem-<permits>-<limit>-<seq>); from the
// head of that queue, a node holds while every node before it holds and
// their permits plus its own fit its limit. Waiters are served in arrival
// order, follow the nodes ahead of them by watches (a release costs the
// others no request), and the token is the node's czxid, as for a lock.
//
// Read-write locks (distlock.RWMutex) follow Curator's recipe: sequential
// nodes under base/rw.<key>; a writer holds when lowest, a reader when no
// writer is below it; an uncontended acquire+release is four requests
// (docs/primitives.md).
//
// # Errors
//
// Errors wrap a distlock kind and the go-zookeeper error: connection loss,
// no server and timeouts match ErrUnavailable; a lock held elsewhere
// matches ErrNotAcquired; a node gone from under its holder matches
// ErrNotHeld; a session that expired while waiting matches ErrLost; a
// request the ACLs forbid (zk: not authenticated) matches ErrInvalidConfig,
// as do bad URLs, whose errors name the bad part. While the connection has
// no session, calls fail at once with ErrUnavailable.
//
// The driver implements backend.Inspector for every kind: Inspect reports
// a key's holder, token and number of waiters, and a semaphore's grants or
// a read-write lock's writer or readers, each with its owner and token,
// and their waiters (2 round trips; docs/zookeeper.md).
package zklock
