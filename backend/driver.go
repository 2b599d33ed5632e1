package backend

import (
	"context"
	"time"
)

// Driver is one client of a lock store: what a single process would hold
// (its connections, its session). Two Drivers made for the same store
// compete for locks exactly as two processes would.
//
// Every method is safe for concurrent use by multiple goroutines. Every
// method that blocks honours its ctx and returns ctx's error (wrapped) when
// ctx ends first.
type Driver interface {
	// Capabilities describes what the store offers. It never changes for the
	// life of the Driver.
	Capabilities() Capabilities

	// TryAcquire makes one attempt to take req.Key for req.Owner with
	// req.TTL, setting the expiry in the same atomic step as the take. It
	// serves every kind the driver grants (req.Kind): what this comment
	// says of "the key" and "held" is said of req.Kind's lock, with the
	// rules Kind adds for it.
	//
	// If the key is free, or the store supports cross-process reentrancy and
	// the key is held by req.Owner, it returns a Grant. If the key is held by
	// another owner it returns an error for which errors.Is(err,
	// ErrNotAcquired) holds, ideally a *NotAcquiredError carrying the
	// holder's remaining TTL, and leaves nothing behind in the store.
	//
	// If ctx ends or the connection fails after the request may have reached
	// the store, the driver must remove what it may have created (checking
	// the owner) before it returns, so no ghost holds the lock; if it cannot,
	// the lock expires by its TTL and the error wraps ErrUnavailable.
	TryAcquire(ctx context.Context, req Request) (Grant, error)

	// Close releases the driver's resources: connections and sessions it
	// opened (never a client the user passed in), and goroutines it started.
	// Locks still held are abandoned to expire by their TTL, session or
	// connection. Close is called once, after every Lock has been released
	// or abandoned.
	Close() error
}

// Request describes one acquisition. The portable layer validates Key,
// generates or checks Owner and fills TTL before a driver sees it.
type Request struct {
	// Kind is what is asked for: the mutex (Exclusive, the zero value), a
	// side of a read-write lock (Read, Write) or permits of a counting
	// semaphore (Permits); see Kind for each one's rules. A driver grants
	// the kinds its Capabilities declare (Capabilities.WaitFor) and
	// answers any other with an error matching ErrUnsupported
	// (UnsupportedKind). Key names a lock of its kind: the mutex, the
	// read-write lock and the semaphore named k are different things in
	// the store and never block each other.
	Kind Kind
	// Key names the lock. It is valid UTF-8 of 1 to MaxKeyLen bytes with no
	// control characters; the driver encodes it for its store as needed, so
	// that different keys never address the same lock.
	Key string
	// Owner identifies the holder: at least 128 random bits by default, or
	// an id the user chose to re-enter the lock across processes. For
	// Permits it is unique to this grant (the portable layer makes a fresh
	// one for every acquisition), so a driver never counts permits per
	// owner.
	Owner string
	// Limit (Permits only) is the most permits the semaphore lets be held
	// at once, as this acquirer sees it (1 to MaxSemaphoreLimit).
	Limit int
	// Permits (Permits only) is how many permits this grant takes, 1 to
	// Limit: all of them or none.
	Permits int
	// Waiting (Write only) tells the attempt that it is part of a wait: if
	// the lock is held it leaves (or renews) the writer-waiting mark that
	// keeps new readers out (see Write). An attempt without it leaves
	// nothing; a Write grant removes the owner's own mark.
	Waiting bool
	// TTL is how long the lock lives without a Refresh. Drivers whose
	// lifetime is not a per-lock TTL report the TTL they apply in
	// Grant.TTL.
	TTL time.Duration
	// Drift is the clock-drift margin the portable layer subtracts from
	// TTL when it computes the lease's validity. A driver that must judge
	// validity itself before granting (Redlock: TTL − elapsed − drift > 0)
	// uses it, so both layers agree.
	Drift time.Duration
	// OnLost, when not nil, must be called by the driver if the store
	// tells it the lock is gone before Release (session expired,
	// connection closed, lease revoked). It never blocks. The driver may
	// call it more than once (and after Release): the portable layer takes
	// the first call and ignores the rest, and calls for a hold that has
	// already ended. It still calls Release for the lock (see Lock).
	OnLost func(err error)
	// OnDoubt, when not nil, may be called by the driver as soon as it
	// loses contact with the store while the lock may still be held (a
	// connection dropped, keepalives failing), instead of letting the
	// portable layer find out at the next Refresh. until is the last
	// instant the driver can vouch for the lock: the store cannot have
	// handed it to anyone else before then (e.g. last contact plus what is
	// left of a session); zero means the driver cannot tell and the
	// validity the portable layer computed stands.
	//
	// The portable layer reports the lease in doubt at once, ends its
	// validity at until minus the drift margin if that is sooner (never
	// later), and checks the lock with Refresh until one sent after the
	// last OnDoubt succeeds (back to held) or the validity runs out
	// (ErrLost). The driver may call it again; it must not block.
	OnDoubt func(cause error, until time.Time)
	// OnRestored, when not nil, may be called by the driver after OnDoubt
	// when contact with the store is back, so that the portable layer
	// checks the lock with a Refresh at once rather than at its next
	// retry. It only hastens the check: the lease is held again only once
	// that Refresh succeeds. It must not block.
	OnRestored func()
}

// Grant is the outcome of a successful acquisition.
type Grant struct {
	// Lock is the handle to release or refresh the lock.
	Lock Lock
	// Token is the fencing token: strictly greater than every token granted
	// before for the same key, by this store, to any holder.
	Token uint64
	// TTL is the lifetime the store applied; zero means Request.TTL. A
	// PerLockTTL store may apply a shorter first life (Redis bounds a lock
	// handed to a queued waiter by the waiter's liveness window): the
	// lease's validity then counts TTL, and renewals still ask for
	// Request.TTL. For other stores renewals keep TTL.
	TTL time.Duration
	// ValidFrom is when the request that set the TTL was sent. Zero means
	// the moment the acquiring call started, which is always safe; a queue
	// driver that waited must set it to when its lease or session was last
	// confirmed alive, not to when the wait began. A grant whose validity
	// (ValidFrom + TTL − Request.Drift) has run out by the time the
	// portable layer receives it is released at once and the acquisition
	// fails with ErrUnavailable (a wait tries again).
	ValidFrom time.Time
}

// Lock is a lock held in the store. Its methods may be called concurrently.
//
// The portable layer calls Release exactly once per Grant: after the user
// released the lock, and also after the lock was found gone (Refresh said
// ErrNotHeld) or lost (OnLost, or the validity ran out). So a driver that
// keeps state per lock (a set of held locks, a pinned connection, a name
// slot) frees it in Release, and needs no path of its own for locks that
// are gone; HeldSet keeps such a set for drivers that push doubt or loss.
type Lock interface {
	// Refresh confirms the lock is still held by its owner and, for
	// LifetimeTTL stores, extends it so it lives at least ttl from now. It
	// never shortens a longer remaining lifetime. It returns an error
	// wrapping ErrNotHeld if the store no longer holds the lock for this
	// owner, and one wrapping ErrUnavailable if it could not tell.
	Refresh(ctx context.Context, ttl time.Duration) error

	// Release frees the lock if it is still held by its owner (an atomic
	// compare-and-delete), or lowers the store's hold count for drivers with
	// cross-process reentrancy. It returns an error wrapping ErrNotHeld if
	// the lock was no longer held by its owner; the store is then unchanged.
	// Releasing a lock already gone (after a Refresh said ErrNotHeld, or
	// OnLost) must be harmless: ErrNotHeld, nothing changed in the store,
	// never another holder's lock freed.
	// If the store cannot be reached, Release returns an error wrapping
	// ErrUnavailable; the driver may keep trying in the background (until
	// its Close) so that the lock is freed sooner than its TTL, as long as
	// every attempt is owner-checked.
	Release(ctx context.Context) error
}
