// Package etcdlock is the etcd backend of distlock: fair, queued locks on
// etcd leases and revisions, with the lock key's create revision as the
// fencing token. Import it for its side effect to register the etcd:// and
// etcds:// URL schemes, or build a Driver over your own client with New.
//
// # URLs
//
//	etcd://h1:2379,h2:2379/prefix?ttl=30s
//	etcd://user:password@h1:2379/prefix
//	etcds://h1:2379/prefix?tls_ca=/etc/etcd/ca.pem&tls_cert=c.pem&tls_key=k.pem
//
// Hosts without a port get 2379. The path is the key prefix of every lock
// (default "distlock/"). Parameters:
//
//	ttl=30s                        lease TTL shared by the driver's locks (≥ 2s, whole seconds)
//	dial_timeout=5s                bound on connecting to the cluster
//	tls_ca=FILE                    etcds: PEM CA bundle (default: the system roots)
//	tls_cert=FILE&tls_key=FILE     etcds: client certificate
//	tls_server_name=NAME           etcds: name to verify instead of the host's
//	tls_insecure_skip_verify=true  etcds: do not verify the server (testing only)
//
// Unknown parameters are errors; passwords never appear in errors.
//
// # Semantics
//
// A Driver holds one etcd lease (its session), granted on first use and
// kept alive by one goroutine; every lock and waiter of the Driver is a key
// bound to that lease, so every lock has the lease's TTL
// (Capabilities.Lifetime is session, PerLockTTL false): a per-acquisition
// TTL option does not change it. Lock.Refresh renews the lease and checks
// that the lock's key still exists. If the lease ends (expired, revoked, or
// not confirmed alive for a whole TTL) every lock on it is reported lost.
//
// Each acquisition puts one key under the lock's range; the key with the
// lowest create revision holds the lock, and each waiter follows only its
// own key and the two keys just before it, through watches of those keys
// that stay open across waits; so waiters are served in arrival order, a
// release is sent to at most three watches and makes at most two waiters
// send a request, and the next holder is granted the lock by the release's watch event
// itself, with no request in between. TryAcquire puts its key only if the range is empty, in one
// transaction. Release deletes the key by its name; a name is reused (so
// that deleted keys do not pile up in the lock's range until compaction)
// only once its key is known gone with no deletion in flight, so a retried
// release cannot delete a newer holder's key. Driver.OwnerCmp gives the comparison that guards your own
// etcd transactions with the lock.
//
// Semaphores (distlock.Locker.Semaphore) are native: every acquisition
// puts a lease-bound key in the semaphore's range, and the keys in
// create-revision order whose permits fit the limit hold, so waiters are
// served in arrival order; the token is the key's create revision.
//
// Read-write locks (distlock.RWMutex) order keys by create revision under
// <prefix>%<key>%rw/: a writer holds when oldest, a reader when no writer
// is older; an uncontended acquire+release is two requests
// (docs/primitives.md).
//
// # Errors
//
// Unreachable servers, lost leaders and timeouts wrap
// backend.ErrUnavailable together with the etcd client's error; a lock
// whose key or lease is gone wraps backend.ErrNotHeld; a waiter whose lease
// or key disappeared while it waited gets an error wrapping backend.ErrLost.
// Bad URLs and options wrap backend.ErrInvalidConfig and name the bad part.
package etcdlock
