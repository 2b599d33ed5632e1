// Package redislock is the Redis backend of distlock for a single server
// (with or without replicas) or a Redis Cluster; Redlock over several
// independent primaries is package redlock, which shares this package's
// key layout and scripts. Import it for its side effect of registering the
// redis:// and rediss:// schemes (mode=redlock URLs need package redlock
// imported too), or build a driver from a go-redis client you already
// have with [New] ([New] says what the driver needs from such a client:
// go-redis without ContextTimeoutEnabled does not end its calls at their
// ctx's deadline).
//
// # URLs
//
//	redis://[user:password@]host[:port][/db][?param=value&...]
//	rediss://...                               the same over TLS
//	redis://h1:6379,h2:6379,h3:6379            a Redis Cluster (mode=cluster is the default for several hosts)
//	redis://h1,h2,h3?mode=redlock              Redlock over independent primaries: package redlock
//
// Parameters (unknown ones are errors): ttl (read by distlock.Open: the
// default lease TTL), mode (single, cluster; redlock: package redlock), wait (queue, the
// default: fair FIFO hand-off;
// notify, the only mode of wait_replicas: waiters race when woken), prefix
// (of every Redis
// key, default "distlock"), wait_replicas (a grant counts only once N
// replicas acknowledged it, single mode), wait_timeout (bound of that WAIT,
// default 1s), dial_timeout (5s), read_timeout (3s), write_timeout (=
// read_timeout), pool_size, cluster_refresh (how often a Cluster client
// reloads the slot map, default 1s), and for rediss:// tls_ca (PEM CA
// file), tls_cert and tls_key (client certificate), tls_server_name and
// tls_insecure_skip_verify. The path is the database number (not in
// Cluster mode).
//
// # Semantics
//
// A lock is a hash PREFIX:{KEY}:lock holding the owner, a hold count and the
// fencing token, with a TTL; the token comes from the counter
// PREFIX:{KEY}:fence, which never expires; releases are announced on the
// channel PREFIX:{KEY}:released. The braces are a hash tag, so the three
// share one Cluster slot; '{', '}' and '%' in keys are percent-escaped, so
// distinct keys never share Redis keys. Acquire, release and refresh are Lua
// scripts (EVALSHA, falling back to EVAL when the server lost its script
// cache) that check the owner; the TTL is set in the same script that takes
// the lock, a refresh or re-entry never shortens it, and the same owner
// re-enters from any process (the hold count balances). In queue mode
// ([WaitQueue]) waiters queue in Redis and a release hands the lock to the
// oldest live waiter, whose grant is the hand-off message on its driver's
// own channel; in notify mode ([WaitNotify]) waiters share one pub/sub
// connection per driver, are woken by releases and race. Renewals of many
// leases go out in one pipeline. An uncontended acquire + release is two
// round trips: one script each.
//
// Plain and Cluster mode trust one primary per key: Redis replicates
// asynchronously, so a failover right after a grant can hand the same lock
// to a second client. wait_replicas narrows that window; Redlock (package
// redlock) closes it for crashes of a minority of nodes that keep their
// data. docs/redis.md tells the whole story.
//
// Semaphores (distlock.Locker.Semaphore) are native in plain and Cluster
// mode: a sorted set of grants scored by expiry, taken, renewed and
// released by one script each (one round trip); waiters subscribe to the
// semaphore's channel, unordered. wait_replicas offers none
// (ErrUnsupported; docs/primitives.md says why).
//
// Read-write locks (distlock.RWMutex; single server and Cluster, not with
// wait_replicas) keep one hash, a sorted set of read holds and
// a write counter per key under the key's hash tag: one script per
// attempt, renewal and release (docs/primitives.md).
//
// # Errors
//
// Network failures, timeouts, a closed client and a WAIT that too few
// replicas acknowledged wrap distlock.ErrUnavailable together with the
// go-redis error; a lock held by another owner is a
// *backend.NotAcquiredError carrying the holder's remaining TTL; a release
// or refresh of a lock the owner no longer holds wraps ErrNotHeld; bad URLs
// wrap ErrInvalidConfig and never show the password, and so do a login the
// server refuses (NOAUTH, WRONGPASS: Open checks it) and a URL
// whose server may evict keys (a maxmemory with a maxmemory-policy other
// than noeviction: an evicted lock or fencing counter breaks exclusion and
// token order), unless the URL says allow_eviction=true. When an acquisition
// fails after its script may have run, the driver releases what it may have
// taken (owner-checked) before returning (on a client that ignores ctx
// deadlines, a call still out a second after its ctx ended is given back
// when it ends; see [New]); if it cannot, the lock expires by its TTL.
package redislock
