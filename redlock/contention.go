package redlock

import (
	"context"
	"time"
)

// contendedFor is how long after an attempt on a key met another holder the
// driver asks the first node alone first (see TryAcquire).
const contendedFor = time.Second

// maxContended bounds the keys the driver remembers as contended.
const maxContended = 4096

// contended reports whether an attempt on key met another holder lately,
// and how long to yield to waiters before asking if this driver released
// the key just now.
func (r *Driver) contended(key string) (yield time.Duration, busy bool) {
	r.busyMu.Lock()
	defer r.busyMu.Unlock()
	b, ok := r.busy[key]
	if !ok || time.Since(b.refused) >= contendedFor {
		return 0, false
	}
	if since := time.Since(b.released); since < b.yield {
		yield = b.yield - since
	}
	return yield, true
}

// released records that a release of key took took, if the key is
// contended: the driver's next attempt yields to the waiters it woke for
// twice that (at most maxYield), their time to hear it and ask.
func (r *Driver) released(key string, took time.Duration) {
	r.busyMu.Lock()
	defer r.busyMu.Unlock()
	if b, ok := r.busy[key]; ok && time.Since(b.refused) < contendedFor {
		b.released, b.yield = time.Now(), min(2*took, maxYield)
		r.busy[key] = b
	}
}

// maxYield bounds a releasing driver's yield to the waiters of a key.
const maxYield = 5 * time.Millisecond

// busyKey is what a Redlock driver remembers of a contended key.
type busyKey struct {
	refused  time.Time     // an attempt met another holder
	released time.Time     // this driver released it
	yield    time.Duration // how long after released the driver yields
}

// observe records that an attempt on key met another holder.
func (r *Driver) observe(key string) {
	r.busyMu.Lock()
	defer r.busyMu.Unlock()
	if len(r.busy) >= maxContended {
		clear(r.busy)
	}
	b := r.busy[key]
	b.refused = time.Now()
	r.busy[key] = b
}

// sleepCtx sleeps d or until ctx ends.
func sleepCtx(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return context.Cause(ctx)
	}
}
