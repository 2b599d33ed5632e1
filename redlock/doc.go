// Package redlock is the Redlock backend of distlock: each lock is taken on
// a majority (N/2+1) of N independent Redis primaries (not replicas of one
// another) within its TTL, so a minority of them crashing loses no lock,
// provided they persist with appendfsync always (or stay down longer than
// the longest TTL). Import it for its side effect of serving mode=redlock
// of the redis:// and rediss:// schemes, or build a driver from go-redis
// clients you already have, one per primary, with [New]. Package
// redislock serves a single server and a Redis Cluster; a program may
// import both, and one that imports only redislock is told, by
// distlock.Open, to import this package for a Redlock URL.
//
// # URLs
//
//	redis://[user:password@]h1[:port],h2,h3[/db]?mode=redlock[&param=value...]
//	rediss://...                               the same over TLS
//
// Parameters (unknown ones are errors) are redislock's (prefix,
// dial_timeout, read_timeout, write_timeout, pool_size, allow_eviction and
// the tls_* ones; ttl is read by distlock.Open), and wait: queue (the
// default: fair FIFO hand-off, queued on the first node) or notify
// (waiters race when woken). wait_replicas and cluster_refresh are
// refused. distlock.Open confirms that a majority of the nodes answer PING
// and that none may evict keys.
//
// # Semantics
//
// A node's lock is redislock's: the hash PREFIX:{KEY}:lock (owner, hold
// count, fencing token) with a TTL, taken, refreshed and released by the
// same owner-checked scripts. An attempt asks every node at once (one
// script per node, in parallel) and counts only if a majority granted with
// validity left (TTL − elapsed − clock drift): it returns once the first
// node and a majority granted with a token they already record, without
// waiting for the rest. The fencing token comes from a majority too: each
// node mints its counter's next value, and when they disagree a second
// round writes the highest seen plus one to the granting nodes, so tokens
// grow across grants as long as every grant is confirmed by a majority
// (docs/redis.md gives the argument and its limits). A release or refresh
// that fewer than a majority held wraps ErrNotHeld (a release still frees
// the stragglers).
//
// In queue mode ([WaitQueue], the default) waiters queue on the first node
// as on a single server, and only the waiter it hands the lock to takes
// the other nodes, in one parallel round, so waiters split no vote and
// grants come in arrival order; when the first node fails, a wait falls
// back to notify mode for a while. In notify mode ([WaitNotify]) every
// node announces releases on one pub/sub connection per node, and waiters
// race. Renewals of many leases go out in one pipeline per node.
//
// Redlock offers no semaphore, read-write lock or inspection
// (Capabilities: Semaphore and RW empty, Inspect false; ErrUnsupported),
// and no multi-key step (AcquireAll takes the keys one by one). It frees
// a lock by hand (backend.Inspector's ForceRelease) on every node.
//
// # Errors
//
// Too few nodes answering wraps distlock.ErrUnavailable with each node's
// error; a lock held elsewhere is a *backend.NotAcquiredError carrying the
// shortest remaining TTL among the refusing nodes; so many nodes refusing
// the login or an ACL command that no majority can grant wraps
// ErrInvalidConfig; bad URLs wrap ErrInvalidConfig and never show the
// password. A failed attempt gives back what it took on every node that
// granted or did not answer.
package redlock
