package backend

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"strconv"
	"time"
)

// The optional interfaces: what some stores can do beyond one attempt.
// Each serves every Kind the driver grants, and the driver declares per
// kind which wait it offers (Capabilities.WaitFor), so a new kind adds no
// interface.

// Waiter is implemented by drivers whose store queues waiters or blocks them
// in the server (wait kind WaitQueue for some Kind).
type Waiter interface {
	// Wait waits until req is granted to req.Owner or ctx ends. When it
	// returns an error, nothing of this attempt is left queued or held in
	// the store. If the driver's own session or lease ends while it waits,
	// Wait returns an error wrapping ErrLost: never a grant.
	//
	// A driver may ride out transient failures itself (a dropped watch, a
	// leader election) to keep its place in line while its session lives.
	// When it gives up on one, it returns an error wrapping ErrUnavailable
	// and the portable layer calls Wait again after a backoff, at the back
	// of the line. For LifetimeConnection stores a connection lost while
	// waiting is such a transient failure (the next Wait uses a new
	// connection), not ErrLost.
	//
	// The portable layer calls it only for a kind whose wait is WaitQueue;
	// for another kind a driver returns an error matching ErrUnsupported.
	Wait(ctx context.Context, req Request) (Grant, error)
}

// Notifier is implemented by drivers whose store can announce releases
// (wait kind WaitNotify for some Kind). Only such stores keep
// writer-waiting marks for the waits the portable layer runs, so
// withdrawing one is a Notifier's method too.
type Notifier interface {
	// Subscribe starts listening for releases of the lock of kind kind
	// named key (Read and Write name the same read-write lock) and
	// returns once the store confirmed the subscription, so a release
	// after Subscribe returns is never missed. The returned channel
	// receives (without blocking the driver, coalesced) after each
	// release. The caller must call cancel. For a kind the driver does not
	// announce it returns an error matching ErrUnsupported.
	Subscribe(ctx context.Context, key string, kind Kind) (released <-chan struct{}, cancel func(), err error)

	// Withdraw removes the writer-waiting mark (see Read) that
	// req.Owner's Write attempts with Request.Waiting left for req (its
	// Kind and Key), if it is still its own; the portable layer calls it
	// when a Write wait it runs (poll, notify) ends without a grant. It
	// is harmless when there is no mark, and a driver whose attempts
	// leave none (or that grants no Write) returns nil. A wrapper
	// forwards it with Subscribe.
	Withdraw(ctx context.Context, req Request) error
}

// Batcher is implemented by drivers that act on many locks in one round
// trip of their store. Each half is declared in Capabilities
// (BatchRefresh, MultiAtomic) and the portable layer calls only what is
// declared; a half the driver lacks answers ErrUnsupported. Either alone
// means nothing (see Capabilities.Offers): a wrapper that forwards its
// inner driver's Capabilities without the method (a fault injector, a
// metrics shim) is a driver without it, not a broken one. Its methods are
// safe for concurrent use.
type Batcher interface {
	// RefreshAll (Capabilities.BatchRefresh) refreshes locks[i] to live at
	// least ttls[i] in one round trip (pipelining) and returns one error
	// per lock (nil where it succeeded), with the meaning of Lock.Refresh.
	// The locks all came from this driver. The portable watchdog uses it
	// to renew every due mutex lease of a Locker at once.
	RefreshAll(ctx context.Context, locks []Lock, ttls []time.Duration) []error

	// TryAcquireMulti (Capabilities.MultiAtomic) makes one attempt to
	// take every request's key, all in one atomic step of the store:
	// either every key is granted, or none is and the store is left as
	// it was. The requests are for the mutex (Exclusive), have distinct
	// keys, are sorted by key, and share one Owner; each is decided as
	// Driver.TryAcquire would decide it alone (a key held by req.Owner is
	// re-entered where the store counts holds per owner). The portable
	// layer (distlock.AcquireAll and TryAcquireAll) tries it first, one
	// round trip instead of one per key, and no other client ever sees a
	// part of the set held by the attempt.
	//
	// On success it returns one Grant per request, in the order of reqs,
	// each with the meaning of a TryAcquire's Grant: its own Lock
	// (refreshed, released and lost on its own, with its request's
	// hooks), and a Token strictly greater than every token granted
	// before for its key.
	//
	// If any key is held by another owner it returns an error for which
	// errors.Is(err, ErrNotAcquired) holds, ideally a *NotAcquiredError
	// whose Key is a held key, and takes nothing: no other client may
	// see any of the keys held by this attempt, even for a moment.
	//
	// If the store cannot take this set of keys in one step (keys in
	// different Redis Cluster slots, more keys than one transaction
	// may hold), it returns an error matching ErrUnsupported before
	// sending anything, and the portable layer takes the keys one by
	// one instead.
	//
	// When the outcome is unknown, the cleanup rules of
	// Driver.TryAcquire apply to every key.
	TryAcquireMulti(ctx context.Context, reqs []Request) ([]Grant, error)
}

// OwnLocks is the check of a Batcher's RefreshAll that each lock came
// from this driver: own[i] is locks[i] as the driver's lock type T where
// it is one and mine says it is this driver's; for any other lock, errs[i]
// is an error of the driver named driver matching ErrInvalidConfig (a
// driver that refreshes locks of another of its types as well sets their
// errors after this).
func OwnLocks[T Lock](driver string, locks []Lock, errs []error, mine func(T) bool) (own []T) {
	own = make([]T, len(locks))
	for i, bl := range locks {
		if l, ok := bl.(T); ok && mine(l) {
			own[i] = l
			continue
		}
		errs[i] = fmt.Errorf("%s: refresh: %w: lock %T is not from this driver", driver, ErrInvalidConfig, bl)
	}
	return own
}

// Announcer is implemented by drivers whose store keeps a value beside a
// held mutex, set by its holder, and can push the changes of a mutex's
// holder and value to watchers: what an election's leader proclaims and
// its observers are told (distlock.Leadership.Proclaim,
// distlock.Election.Observe). Each half is declared in Capabilities
// (Values, Watch) and the portable layer calls only what is declared; a
// half the driver lacks answers ErrUnsupported. A wrapper that forwards
// its inner driver's Capabilities without the methods is a driver without
// them (see Capabilities.Offers). Its methods are safe for concurrent use.
type Announcer interface {
	// SetValue (Capabilities.Values) sets the value of lock, a mutex
	// (Kind Exclusive) granted by this driver, in one atomic step of the
	// store that checks the lock is still held under its grant (its
	// owner and token; for a queue store, its own entry at the head of
	// the line): if it is not, SetValue changes nothing and returns an
	// error matching ErrNotHeld. It changes neither the lock's token nor
	// its TTL. Inspect reports the value in Info.Value until the lock is
	// released or expires; the next holder starts without one. value is
	// 1 to 128 bytes of printable ASCII without spaces (the portable
	// layer checks it). For a lock of another kind it returns an error
	// matching ErrUnsupported.
	SetValue(ctx context.Context, lock Lock, value string) error

	// Watch (Capabilities.Watch) starts watching the mutex named key and
	// returns once the store confirmed the watch, so that a change after
	// Watch returns is never missed. The channel receives (without
	// blocking the driver, coalesced) after each change of the lock's
	// holder or value: a grant, a release, a SetValue, a holder's session
	// ending, an operator deleting the lock. One change is exempt: a lock
	// expiring by its TTL while Inspect reported that TTL (Info.TTL > 0)
	// need not be announced, and the portable layer reads the lock again
	// when that TTL runs out. The channel is closed when the driver can no
	// longer promise that (its connection to the store dropped, the
	// driver closed): the caller reads the lock by polling and may watch
	// again. The caller must call cancel.
	Watch(ctx context.Context, key string) (changed <-chan struct{}, cancel func(), err error)
}

// Inspector is the operator's side of a driver: it reports a lock's state
// without taking it (used by `distlock status`, `distlock list` and the
// election), and frees a mutex whoever holds it (`distlock release
// --force`). Each half is declared in Capabilities (Inspect for Inspect
// and List, ForceRelease) and the portable layer calls only what is
// declared; a half the driver lacks answers ErrUnsupported (Redlock
// frees but cannot inspect). A wrapper that forwards
// its inner driver's Capabilities without the methods is a driver without
// them (see Capabilities.Offers).
type Inspector interface {
	// Inspect (Capabilities.Inspect) reports the state of the lock of
	// kind kind named key (Read and Write name the same read-write lock).
	// For a kind the driver cannot inspect it returns an error matching
	// ErrUnsupported.
	Inspect(ctx context.Context, key string, kind Kind) (Info, error)

	// List (Capabilities.Inspect) returns the mutexes held now whose key begins with prefix
	// (every held one when prefix is ""), sorted by key, at most limit of
	// them (no bound when limit <= 0). Each Info is what Inspect would
	// report for its key; free keys are not listed. The result is a
	// snapshot of each key, not of the store as a whole: a lock taken or
	// released while List runs may or may not appear. A store that cannot
	// enumerate its locks returns an error matching ErrUnsupported.
	List(ctx context.Context, prefix string, limit int) ([]Info, error)

	// ForceRelease (Capabilities.ForceRelease) frees the mutex (Kind
	// Exclusive) named key in the store, whoever holds it and however
	// many times its owner re-entered it, and returns what the store knew
	// of the holder it freed (Held, Owner, Token). A free key answers an
	// error matching ErrNotHeld and changes nothing.
	//
	// The freed holder learns of it at its next renewal, which answers
	// ErrNotHeld (or, for a connection-bound store, finds its connection
	// ended): never a renewed lease. The next holder gets a fencing token
	// strictly greater than the freed holder's. Where the store can keep a
	// record, it stores f, and Inspect of key reports it in Info.Forced
	// until the store drops it (its own expiry, or the next force). It is
	// an operator's last resort for a stuck holder (Redisson's
	// forceUnlock); the portable layer calls it through
	// distlock.Locker.ForceRelease.
	ForceRelease(ctx context.Context, key string, f Forced) (Info, error)
}

// Logging is implemented by drivers that log (a store client's own
// messages, a reconnect). The portable layer calls SetLogger once, before
// any other call, with the Locker's logger (distlock.WithLogger; a logger
// that discards everything by default), and the driver logs through it
// from then on, never through slog's default logger.
type Logging interface {
	SetLogger(l *slog.Logger)
}

// Info is a snapshot of a lock's state in the store, for every kind:
//
//   - Exclusive: Held, and the holder in Owner, Token and TTL.
//   - Read, Write: the writer in Owner, Token and TTL, or the readers in
//     Holders (one per owner, sorted by owner); Held when either.
//   - Permits: the grants in Holders (in token order, each with its
//     Permits), their sum in Permits; Held when any.
type Info struct {
	Key   string `json:"key"`
	Held  bool   `json:"held"`
	Owner string `json:"owner,omitempty"`
	// Token is the holder's fencing token, or the last one granted if free
	// (0 when the store cannot tell).
	Token uint64 `json:"token,omitempty"`
	// TTL is the holder's remaining lifetime; 0 if free or unknown.
	TTL time.Duration `json:"ttl,omitempty"`
	// Waiters is the number of queued waiters, or -1 when the store does not
	// know (stores whose waiters poll or subscribe).
	Waiters int `json:"waiters"`
	// Holders are the grants of a shared kind: a semaphore's grants, a
	// read-write lock's readers.
	Holders []Holder `json:"holders,omitempty"`
	// Permits is the number of a semaphore's permits held, in all.
	Permits int `json:"permits,omitempty"`
	// Value is what the mutex's holder set with Announcer.SetValue (an
	// election leader's proclaimed value); "" if it set none, or the
	// store keeps no values.
	Value string `json:"value,omitempty"`
	// Forced is the last forced release of the key the store recorded
	// (Inspector.ForceRelease), or nil.
	Forced *Forced `json:"forced,omitempty"`
}

// A Holder is one grant of a shared kind as Inspect reports it: a
// semaphore's grant of Permits permits, or a reader.
type Holder struct {
	Owner   string        `json:"owner"`
	Permits int           `json:"permits,omitempty"`
	Token   uint64        `json:"token,omitempty"` // 0 when the store cannot tell
	TTL     time.Duration `json:"ttl,omitempty"`   // remaining; 0 if unknown
}

// Forced records a lock freed by hand (Inspector.ForceRelease).
type Forced struct {
	// By names who freed it (an operator, a host:pid); Reason says why.
	By     string `json:"by"`
	Reason string `json:"reason,omitempty"`
	// At is when it was freed, by the freeing client's clock.
	At time.Time `json:"at"`
	// Owner and Token are the holder it freed.
	Owner string `json:"owner,omitempty"`
	Token uint64 `json:"token,omitempty"`
}

// ForcedKeep is how long a store keeps the record of a forced release
// where it has to bound it (a Redis key's expiry, an etcd lease).
const ForcedKeep = 24 * time.Hour

// Server names a store's server for telemetry.
type Server struct {
	// Address is its host name or IP address, as configured; Port its
	// port (0: unknown).
	Address string `json:"address,omitempty"`
	Port    int    `json:"port,omitempty"`
	// System is the store's db.system.name in the semantic conventions'
	// well-known values ("redis", "mysql", "mariadb", "postgresql"), or ""
	// for a store that is not one of them (ZooKeeper, etcd).
	System string `json:"system,omitempty"`
}

// ServerOf splits hostport ("host:port", "[::1]:port", or a bare host)
// into a Server of system; a port that is not a number is 0.
func ServerOf(hostport, system string) Server {
	s := Server{Address: hostport, System: system}
	if h, p, err := net.SplitHostPort(hostport); err == nil {
		s.Address = h
		s.Port, _ = strconv.Atoi(p)
	}
	return s
}
