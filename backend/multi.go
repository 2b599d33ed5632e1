package backend

import "context"

// Multi-lock in one step. The portable layer (distlock.AcquireAll and
// TryAcquireAll) takes several keys one after another, in one global
// order, on every store. A store that can take several keys in one atomic
// step (one Lua script on one Redis node, one etcd transaction) declares
// Capabilities.MultiAtomic and implements MultiAcquirer: the portable
// layer then tries that step first, one round trip instead of one per
// key, and no other client ever sees a part of the set held by the
// attempt. Either alone means no such step (see OffersMulti): a wrapper
// that forwards its inner driver's Capabilities without the method (a
// fault injector, a metrics shim) is a driver without it, not a broken
// one.

// MultiAcquirer is implemented by drivers that can take several locks in
// one atomic step of their store (capability MultiAtomic). Its method is
// safe for concurrent use.
type MultiAcquirer interface {
	// TryAcquireMulti makes one attempt to take every request's key, all
	// in one atomic step of the store: either every key is granted, or
	// none is and the store is left as it was. The requests have distinct
	// keys, are sorted by key, and share one Owner; each is decided as
	// Driver.TryAcquire would decide it alone (a key held by req.Owner is
	// re-entered where the store counts holds per owner).
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

// OffersMulti returns c with MultiAtomic cleared unless d implements
// MultiAcquirer: what d really offers.
func (c Capabilities) OffersMulti(d Driver) Capabilities {
	if _, ok := d.(MultiAcquirer); !ok {
		c.MultiAtomic = false
	}
	return c
}
