package backend

import (
	"fmt"
	"time"
)

// WaitKind says how a driver waits for a held lock.
type WaitKind string

const (
	// WaitPoll: the portable layer retries TryAcquire with jittered backoff.
	WaitPoll WaitKind = "poll"
	// WaitNotify: the driver implements Notifier; waiters sleep until a
	// release is announced or the holder's TTL runs out, and retry.
	WaitNotify WaitKind = "notify"
	// WaitQueue: the driver implements Waiter and queues waiters in the store.
	WaitQueue WaitKind = "queue"
)

// TTLLimit is the longest TTL the portable layer ever asks a driver for:
// 365 days. Every store keeps at least that much, so a driver converts a
// TTL to its store's units (milliseconds, seconds) without overflow, and
// the client's validity arithmetic (send time + TTL) stays far from the
// limits of time.Duration.
const TTLLimit = 365 * 24 * time.Hour

// LifetimeKind says what keeps a held lock alive in the store.
type LifetimeKind string

const (
	// LifetimeTTL: each lock has its own TTL, extended by Refresh.
	LifetimeTTL LifetimeKind = "ttl"
	// LifetimeSession: the lock lives as long as the client's session (a
	// ZooKeeper session, an etcd lease shared by the client's locks); its TTL
	// is the session's and is the same for every lock of the Driver.
	LifetimeSession LifetimeKind = "session"
	// LifetimeConnection: the lock lives as long as the connection holding it
	// (an open SQL transaction); a dropped connection frees it at once, and
	// the holder only learns of it at its next Refresh.
	LifetimeConnection LifetimeKind = "connection"
)

// Capabilities describes what a store offers, machine-readably: the
// conformance suite skips what a store lacks (with the reason) and tools
// print it.
type Capabilities struct {
	// Name is a short name for the store and mode, e.g. "redis", "redlock".
	Name string `json:"name"`
	// Wait is how waiters for the mutex (Kind Exclusive) wait. It and the
	// wait of every other kind (WaitFor) must match the optional
	// interfaces the driver implements (Notifier for WaitNotify, Waiter
	// for WaitQueue).
	Wait WaitKind `json:"wait"`
	// Lifetime is what keeps a held lock alive.
	Lifetime LifetimeKind `json:"lifetime"`
	// PerLockTTL reports whether Request.TTL is honoured per lock. When
	// false, every lock gets the TTL of the driver's session (Grant.TTL).
	PerLockTTL bool `json:"per_lock_ttl"`
	// MinTTL is the shortest TTL the store can honour; shorter requests are
	// rejected by the portable layer.
	MinTTL time.Duration `json:"min_ttl"`
	// MaxTTL is the longest TTL the store can honour (0: TTLLimit); longer
	// requests are rejected by the portable layer instead of being cut
	// short silently. The portable layer never asks for more than
	// TTLLimit, whatever MaxTTL says.
	MaxTTL time.Duration `json:"max_ttl,omitempty"`
	// MaxKeyLen is the longest key in bytes the store accepts, 0 for the
	// portable default.
	MaxKeyLen int `json:"max_key_len,omitempty"`
	// Fair reports whether waiters are granted the lock in arrival order.
	Fair bool `json:"fair"`
	// CrossProcessReentry reports whether two Drivers acquiring with the same
	// Owner both hold the lock (the store counts holds per owner).
	CrossProcessReentry bool `json:"cross_process_reentry"`
	// Replication says what a grant survives, in a sentence, e.g. "single
	// node" or "majority quorum (Raft)"; shown by tools, not interpreted.
	Replication string `json:"replication,omitempty"`
	// Semaphore says how waiters for a counting semaphore's permits wait
	// (Kind Permits), or is empty when the driver grants no permits.
	Semaphore WaitKind `json:"semaphore,omitempty"`
	// RW says how the waiters of the store's read-write locks wait (Kinds
	// Read and Write), or is empty when the store has none. A driver may
	// offer them in some modes only (redislock without WaitReplicas).
	RW WaitKind `json:"rw,omitempty"`
	// SemaphoreFair reports whether waiters for a semaphore's permits are
	// granted in arrival order: a waiter for many permits is not overtaken
	// by a later waiter for fewer. Meaningless without Semaphore.
	SemaphoreFair bool `json:"semaphore_fair,omitempty"`
	// MultiAtomic reports whether the store takes several keys of a
	// multi-lock in one atomic step (Batcher.TryAcquireMulti). A driver
	// without Batcher offers no such step whatever this says (a wrapper
	// of another driver; see Offers). mem, Redis on
	// one server and etcd have it. SQL stores do not (a row lock is freed
	// only by ending its transaction, so keys locked in one could not be
	// released one by one), nor ZooKeeper (a multi cannot require a
	// lock's queue to be empty), nor Redis Cluster (each lock in a slot
	// of its own) or Redlock: docs/primitives.md.
	MultiAtomic bool `json:"multi_atomic,omitempty"`
	// BatchRefresh reports whether the store refreshes many locks in one
	// round trip (Batcher.RefreshAll): Redis, Redlock, ZooKeeper, etcd and
	// SQL in session mode (one statement per session).
	// A driver without Batcher offers none whatever this says (see
	// Offers).
	BatchRefresh bool `json:"batch_refresh,omitempty"`
	// Values reports whether the holder of a mutex can set a value kept
	// beside it, owner-checked in the store (Announcer.SetValue: an
	// election leader's Proclaim). A driver without Announcer offers none
	// whatever this says (see Offers).
	Values bool `json:"values,omitempty"`
	// Watch reports whether the store pushes the changes of a mutex's
	// holder and value (Announcer.Watch), so that an election's observers
	// need not poll. A driver without Announcer offers none whatever this
	// says (see Offers).
	Watch bool `json:"watch,omitempty"`
	// Inspect reports whether the store reports a lock's state without
	// taking it (Inspector.Inspect, for the mutex at least, and List,
	// which may still answer ErrUnsupported): every store but Redlock. A
	// driver without Inspector offers none whatever this says (see
	// Offers).
	Inspect bool `json:"inspect,omitempty"`
	// ForceRelease reports whether the store frees a mutex whoever holds
	// it (Inspector.ForceRelease). A driver without Inspector offers none
	// whatever this says (see Offers).
	ForceRelease bool `json:"force_release,omitempty"`
	// CtxBounded reports that every call of the driver returns by the end
	// of its ctx even when the store never answers (the rule Driver
	// states), kept by the driver itself: by a store client that honours
	// ctx (etcd's gRPC client) or by a goroutine of the driver's own
	// (zklock's calls over go-zookeeper, which takes no ctx). The portable
	// layer bounds the Release and Refresh of any other driver by a
	// goroutine of its own, one hand-off per call, since some store
	// clients ignore ctx (go-redis); a CtxBounded driver's it calls on the
	// caller's goroutine, with the same bound. A wrapper that forwards its
	// inner driver's Capabilities keeps this only if its own methods keep
	// the bound too.
	CtxBounded bool `json:"ctx_bounded,omitempty"`
	// Server names the server the driver talks to (the first one of a
	// cluster or ensemble, as configured; a zero Address when unknown).
	// The Locker reads it once, when it is made, and records it on its
	// metrics and spans (server.address, server.port and db.system.name,
	// as the OpenTelemetry semantic conventions name them), so that two
	// stores can be told apart.
	Server Server `json:"server,omitzero"`
}

// Offers returns c with what d does not implement cleared: MultiAtomic
// and BatchRefresh unless d is a Batcher, Inspect and ForceRelease unless
// it is an Inspector, Values and Watch unless it is an Announcer. It is
// what d really offers.
func (c Capabilities) Offers(d Driver) Capabilities {
	if _, ok := d.(Batcher); !ok {
		c.MultiAtomic, c.BatchRefresh = false, false
	}
	if _, ok := d.(Inspector); !ok {
		c.Inspect, c.ForceRelease = false, false
	}
	if _, ok := d.(Announcer); !ok {
		c.Values, c.Watch = false, false
	}
	return c
}

// WaitFor returns how the waiters of kind k wait, or "" when the driver
// does not grant k: Wait for Exclusive, RW for Read and Write, Semaphore
// for Permits.
func (c Capabilities) WaitFor(k Kind) WaitKind {
	switch k {
	case Exclusive:
		return c.Wait
	case Read, Write:
		return c.RW
	case Permits:
		return c.Semaphore
	}
	return ""
}

// Polled returns c with every kind it grants waited for by polling, the
// portable wait every store supports: what a wrapper that forwards a
// Driver's methods but not its Waiter or Notifier (a fault injector, a
// spy) must declare. Polling waiters are not served in arrival order:
// Fair and SemaphoreFair are cleared.
func (c Capabilities) Polled() Capabilities {
	c.Wait, c.Fair, c.SemaphoreFair = WaitPoll, false, false
	if c.RW != "" {
		c.RW = WaitPoll
	}
	if c.Semaphore != "" {
		c.Semaphore = WaitPoll
	}
	return c
}

// field names the Capabilities field that declares k's wait, for errors.
func (k Kind) field() string {
	switch k {
	case Read, Write:
		return "rw"
	case Permits:
		return "semaphore"
	}
	return "wait"
}

// Check reports an error if the capabilities are inconsistent with the
// optional interfaces d implements: a kind whose waiters are notified
// needs a Notifier, one whose waiters queue needs a Waiter, and the mutex
// must be granted.
func (c Capabilities) Check(d Driver) error {
	_, notifier := d.(Notifier)
	_, waiter := d.(Waiter)
	for _, k := range kinds {
		w := c.WaitFor(k)
		switch {
		case w == "" && k != Exclusive, w == WaitPoll:
		case w == WaitNotify && !notifier:
			return fmt.Errorf("backend: %s: capabilities say %s=notify but the driver is no Notifier (no Subscribe or Withdraw method)", c.Name, k.field())
		case w == WaitQueue && !waiter:
			return fmt.Errorf("backend: %s: capabilities say %s=queue but the driver has no Wait method", c.Name, k.field())
		case w != WaitNotify && w != WaitQueue:
			return fmt.Errorf("backend: %s: unknown %s kind %q", c.Name, k.field(), w)
		}
	}
	switch c.Lifetime {
	case LifetimeTTL, LifetimeSession, LifetimeConnection:
	default:
		return fmt.Errorf("backend: %s: unknown lifetime kind %q", c.Name, c.Lifetime)
	}
	if c.MinTTL < 0 || c.MaxTTL < 0 || c.MaxKeyLen < 0 {
		return fmt.Errorf("backend: %s: negative MinTTL, MaxTTL or MaxKeyLen", c.Name)
	}
	if c.MaxTTL > 0 && c.MaxTTL < c.MinTTL {
		return fmt.Errorf("backend: %s: MaxTTL %v below MinTTL %v", c.Name, c.MaxTTL, c.MinTTL)
	}
	return nil
}
