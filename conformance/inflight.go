package conformance

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/distlock/distlock"
)

// testCanceledInFlight: an acquisition the store cannot answer (the
// driver partitioned) whose ctx is canceled returns ctx's error, never
// ErrNotAcquired, and for TryAcquire never ErrUnavailable: the caller
// ended its one attempt, the store did not fail (Acquire's error may name
// earlier attempts' unavailability beside the cause, as documented). The cancel comes a moment after the call starts, so the call
// is usually in flight; if the machine is slow and it is not yet, the
// rule is the same. After the heal the key is free within 2×TTL (what a
// request held back by the cut may have taken runs out), and no attempt
// of the canceled calls ever holds it.
//
// It runs over the harness's client only: over a user-made client that
// ignores a cancel and has no read timeout (memlock's harness makes one),
// a canceled TryAcquire on a partitioned store does not return, as the
// Locker runs an attempt whose ctx has no deadline on the caller's
// goroutine (issue 31 weighs that hand-off); a user-client part waits on
// that change.
func testCanceledInFlight(t *testing.T, e *env) {
	p, ok := e.h.(Partitioner)
	if !ok {
		const why = "the harness cannot partition a driver (no conformance.Partitioner)"
		if e.virtual { // the part runs in the case's own t: a Skip would skip the case
			t.Logf("part canceled-in-flight left out: %s", why)
			return
		}
		t.Skip(why)
	}
	canceledInFlight(t, e, p, e.locker(t))
}

// canceledInFlight is testCanceledInFlight with c, the Locker whose calls
// are canceled.
func canceledInFlight(t *testing.T, e *env, p Partitioner, c *client) {
	heal := partition(t, p, c.d)
	calls := []struct {
		name   string
		single bool // one attempt: Acquire may name earlier attempts' ErrUnavailable beside the cause
		fn     func(ctx context.Context, key string) error
	}{
		{"TryAcquire", true, func(ctx context.Context, key string) error { _, err := c.TryAcquire(ctx, key); return err }},
		{"Acquire", false, func(ctx context.Context, key string) error { _, err := c.Acquire(ctx, key); return err }},
	}
	for _, call := range calls {
		key := e.key("inflight-" + call.name)
		ctx, cancel := context.WithCancel(context.Background())
		type result struct {
			err      error
			canceled bool // ctx was canceled when the call returned
		}
		done := make(chan result, 1)
		go func() {
			err := call.fn(ctx, key)
			done <- result{err, ctx.Err() != nil}
		}()
		time.AfterFunc(e.ttl/20, cancel)
		var r result
		select {
		case r = <-done:
		case <-time.After(e.ttl + 10*time.Second):
			t.Fatalf("%s on a partitioned store, its ctx canceled: still running after %v", call.name, e.ttl+10*time.Second)
		}
		cancel()
		err := r.err
		if !r.canceled {
			// The harness's cut refused the call before the cancel (it
			// should hold requests back): nothing was in flight.
			t.Logf("%s on a partitioned store returned before its ctx was canceled: %v", call.name, err)
			if err == nil {
				t.Errorf("%s on a partitioned store succeeded", call.name)
			}
			continue
		}
		switch {
		case err == nil:
			t.Errorf("%s on a partitioned store, its ctx canceled: no error, want context.Canceled", call.name)
		case !errors.Is(err, context.Canceled):
			t.Errorf("%s on a partitioned store, its ctx canceled: %v, want context.Canceled", call.name, err)
		case errors.Is(err, distlock.ErrNotAcquired):
			t.Errorf("%s on a partitioned store, its ctx canceled: %v matches ErrNotAcquired: no one else holds the key", call.name, err)
		case call.single && errors.Is(err, distlock.ErrUnavailable):
			t.Errorf("%s on a partitioned store, its ctx canceled: %v matches ErrUnavailable: the caller ended its one attempt, not the store", call.name, err)
		}
	}
	heal()
	rival := e.locker(t)
	for _, call := range calls {
		key := e.key("inflight-" + call.name)
		le, err := rival.Acquire(ctxFor(t, 2*e.ttl+10*time.Second), key)
		if err != nil {
			t.Errorf("after the heal, a rival could not take %q, which a canceled %s wanted: %v", key, call.name, err)
			continue
		}
		release(t, le)
	}
}
