package backend

import (
	"context"
	"fmt"
)

// MaxSemaphoreLimit is the largest number of permits a semaphore may
// have. It keeps a store's count of permits (and a client's sum of them)
// far from any integer limit.
const MaxSemaphoreLimit = 1 << 20

// SemaphoreRequest describes one acquisition of permits of a counting
// semaphore. The portable layer validates every field before a driver
// sees it.
type SemaphoreRequest struct {
	// Request is as for a lock, with two differences. Key names the
	// semaphore: a semaphore and a lock of the same name are different
	// things in the store and never block each other. Owner is unique to
	// this grant (the portable layer makes a fresh one for every
	// acquisition), so a driver never counts holds per owner.
	Request
	// Limit is the most permits the semaphore lets be held at once, as
	// this acquirer sees it (1 to MaxSemaphoreLimit). Acquirers may
	// disagree; see Semaphorer.
	Limit int
	// Permits is how many permits this grant takes, 1 to Limit: all of
	// them or none.
	Permits int
}

// Semaphorer is implemented by drivers that offer counting semaphores
// natively (capability Semaphore). Each grant is one backend.Lock holding
// Permits permits, refreshed and released as one, with the meaning and the
// guarantees of a lock: its expiry set in the same atomic step as the
// take, owner-checked Refresh and Release, OnLost/OnDoubt/OnRestored as for
// a lock, and Grant.Token strictly greater than every token granted before
// for the same semaphore key, to any holder.
//
// When acquirers disagree on Limit, each grant is decided against the
// acquirer's own Limit: permits are granted only while the permits held
// (by every holder, counting expired ones as free) plus Permits are at
// most Limit. Holders are never evicted: after Limit is lowered, the
// permits already held above it stay held until released or expired.
type Semaphorer interface {
	// TryAcquirePermits makes one attempt to take req.Permits permits of
	// the semaphore req.Key. If fewer are free it returns an error for
	// which errors.Is(err, ErrNotAcquired) holds, ideally a
	// *NotAcquiredError whose RetryAfter is when the first held permit
	// expires, and leaves nothing behind in the store. The cleanup rules
	// of Driver.TryAcquire apply when the outcome is unknown.
	TryAcquirePermits(ctx context.Context, req SemaphoreRequest) (Grant, error)
}

// SemaphoreWaiter is implemented by Semaphorers whose store queues
// waiters (capability Semaphore = WaitQueue). The rules of Waiter.Wait
// apply: on error nothing of this attempt is left queued or held.
type SemaphoreWaiter interface {
	WaitPermits(ctx context.Context, req SemaphoreRequest) (Grant, error)
}

// SemaphoreNotifier is implemented by Semaphorers whose store announces
// releases of permits (capability Semaphore = WaitNotify). The rules of
// Notifier.Subscribe apply, for the semaphore named key.
type SemaphoreNotifier interface {
	SubscribePermits(ctx context.Context, key string) (released <-chan struct{}, cancel func(), err error)
}

// checkSemaphore reports an error if c.Semaphore contradicts the
// semaphore interfaces d implements. A driver without TryAcquirePermits
// offers no semaphore whatever c.Semaphore says (see OffersSemaphore):
// that is what a wrapper embedding another Driver looks like, which passes
// its Capabilities on without its optional methods, and it must not stop
// the wrapper from taking locks.
func (c Capabilities) checkSemaphore(d Driver) error {
	if _, ok := d.(Semaphorer); !ok || c.Semaphore == "" {
		return nil
	}
	switch c.Semaphore {
	case WaitPoll:
	case WaitNotify:
		if _, ok := d.(SemaphoreNotifier); !ok {
			return fmt.Errorf("backend: %s: capabilities say semaphore=notify but the driver has no SubscribePermits method", c.Name)
		}
	case WaitQueue:
		if _, ok := d.(SemaphoreWaiter); !ok {
			return fmt.Errorf("backend: %s: capabilities say semaphore=queue but the driver has no WaitPermits method", c.Name)
		}
	default:
		return fmt.Errorf("backend: %s: unknown semaphore wait kind %q", c.Name, c.Semaphore)
	}
	return nil
}

// OffersSemaphore returns c with Semaphore cleared unless d implements
// Semaphorer: what d really offers.
func (c Capabilities) OffersSemaphore(d Driver) Capabilities {
	if _, ok := d.(Semaphorer); !ok {
		c.Semaphore = ""
	}
	return c
}
