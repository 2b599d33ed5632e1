package conformance

import (
	"errors"
	"testing"
	"time"

	"github.com/distlock/distlock"
	"github.com/distlock/distlock/backend"
)

// testForceRelease: a lock freed by hand (Locker.ForceRelease, where the
// store declares Capabilities.ForceRelease) goes to the client already
// waiting for it with a greater token, the freed holder's lease ends with
// ErrLost at its next renewal, and the force is refused for a free key
// (ErrNotHeld) and without a name for who frees it (ErrInvalidConfig).
func testForceRelease(t *testing.T, e *env) {
	key := e.key("force")
	holder, waiter, op := e.locker(t), e.locker(t), e.locker(t)
	if !op.Capabilities().ForceRelease {
		t.Skipf("the %s store does not declare ForceRelease", op.Capabilities().Name)
	}
	le := mustAcquire(t, holder, key)
	got := make(chan *distlock.Lease, 1)
	failed := make(chan error, 1)
	go func() {
		l2, err := waiter.Acquire(ctxFor(t, 3*e.ttl+30*time.Second), key)
		if err != nil {
			failed <- err
			return
		}
		got <- l2
	}()
	e.inLine(t, waiter, 1, holder.d, Mutex, key, 1)

	if _, err := op.ForceRelease(ctxFor(t, 10*time.Second), key, "", "no name"); !errors.Is(err, distlock.ErrInvalidConfig) {
		t.Errorf("ForceRelease without who frees it = %v, want ErrInvalidConfig", err)
	}
	info, err := op.ForceRelease(ctxFor(t, 10*time.Second), key, "conformance-operator", "stuck holder")
	if err != nil {
		t.Fatalf("ForceRelease of a held lock: %v", err)
	}
	if info.Owner != "" && info.Owner != le.Owner() {
		t.Errorf("ForceRelease reports freeing %q, want the holder %q", info.Owner, le.Owner())
	}
	if info.Token != 0 && info.Token != le.Token() {
		t.Errorf("ForceRelease reports freeing token %d, want the holder's %d", info.Token, le.Token())
	}

	l2 := forcedSuccessor(t, e, le, got, failed)
	rec := &forceRecord{t: t, op: op, key: key, token: le.Token()}
	rec.check("after the force")
	release(t, l2)
	// The record stays over later grants (until the store's own expiry or
	// the key's next force).
	l3 := mustAcquire(t, waiter, key)
	rec.check("after a later grant")
	release(t, l3)
	if !eventually(e.ttl, func() bool {
		_, err = op.ForceRelease(ctxFor(t, 10*time.Second), key, "conformance-operator", "free key")
		return errors.Is(err, distlock.ErrNotHeld)
	}) {
		t.Errorf("ForceRelease of a free key = %v, want ErrNotHeld", err)
	}
}

// forcedSuccessor waits for the waiter's lease (got, or its error on
// failed) after the force freed le, and checks that its token is above
// le's and that le was reported lost.
func forcedSuccessor(t *testing.T, e *env, le *distlock.Lease, got <-chan *distlock.Lease, failed <-chan error) *distlock.Lease {
	t.Helper()
	var l2 *distlock.Lease
	select {
	case l2 = <-got:
	case err := <-failed:
		t.Fatalf("the waiter did not get the lock freed by hand: %v", err)
	case <-time.After(3*e.ttl + 30*time.Second):
		t.Fatal("the waiter did not get the lock freed by hand")
	}
	if l2.Token() <= le.Token() {
		t.Errorf("the next holder's token %d is not above the freed holder's %d", l2.Token(), le.Token())
	}
	if !waitDone(le, 2*e.ttl+5*time.Second) {
		t.Fatal("the freed holder's lease was not reported lost")
	}
	if !errors.Is(le.Err(), distlock.ErrLost) {
		t.Errorf("the freed holder's Err() = %v, want ErrLost", le.Err())
	}
	return l2
}

// forceRecord checks what op's driver reports (where it declares
// Inspect) of the force that freed key from the holder of token: once
// reported, the record stays.
type forceRecord struct {
	t        *testing.T
	op       *client
	key      string
	token    uint64
	recorded bool
}

// check checks the record, when naming the moment.
func (r *forceRecord) check(when string) {
	t := r.t
	if !r.op.Capabilities().Inspect {
		return
	}
	in := r.op.d.(backend.Inspector)
	info, err := in.Inspect(ctxFor(t, 10*time.Second), r.key, backend.Exclusive)
	t.Logf("Inspect %s: record %+v (%v)", when, info.Forced, err)
	if err != nil {
		return
	}
	if info.Forced == nil {
		if r.recorded {
			t.Errorf("Inspect %s reports no record of the force; it reported one before", when)
		}
		return
	}
	r.recorded = true
	if f := info.Forced; f.By != "conformance-operator" || f.Reason != "stuck holder" || (f.Token != 0 && f.Token != r.token) {
		t.Errorf("Inspect's record of the force %s = %+v, want by conformance-operator, reason \"stuck holder\", token %d", when, *f, r.token)
	}
}
