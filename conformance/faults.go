package conformance

import (
	"errors"
	"testing"
	"time"

	"github.com/distlock/distlock"
	"github.com/distlock/distlock/backend"
)

// Cases about network faults, run when the harness implements Partitioner
// or ReplyDropper.

// harnessCan returns e's harness as the optional harness interface T, or
// skips the case, saying why.
func harnessCan[T any](t *testing.T, e *env, why string) T {
	t.Helper()
	h, ok := e.h.(T)
	if !ok {
		t.Skip(why)
	}
	return h
}

func partitioner(t *testing.T, e *env) Partitioner {
	t.Helper()
	return harnessCan[Partitioner](t, e, "the harness cannot partition a driver (no conformance.Partitioner)")
}

func replyDropper(t *testing.T, e *env) ReplyDropper {
	t.Helper()
	return harnessCan[ReplyDropper](t, e, "the harness cannot drop a reply (no conformance.ReplyDropper)")
}

// partition cuts d off and heals it when the case ends (or earlier, by
// calling the returned func).
func partition(t *testing.T, p Partitioner, d backend.Driver) (heal func()) {
	t.Helper()
	if err := p.Partition(ctxFor(t, 10*time.Second), d); err != nil {
		t.Fatalf("harness Partition: %v", err)
	}
	healed := false
	heal = func() {
		if healed {
			return
		}
		healed = true
		if err := p.Heal(ctxFor(t, 10*time.Second), d); err != nil {
			t.Errorf("harness Heal: %v", err)
		}
	}
	t.Cleanup(heal)
	return heal
}

// waitNotHeld waits up to d for le to leave StateHeld (in doubt, or lost).
func waitNotHeld(le *distlock.Lease, d time.Duration) bool {
	return eventually(d, func() bool { return le.State() != distlock.StateHeld })
}

// testPartitionedHolder: a holder cut off from the store by a partition
// stops reporting the lease held within a third of its TTL plus one retry,
// reports it lost, and does so before the store grants it to anyone else.
// The holder runs over the harness's client and over a user-made one.
func testPartitionedHolder(t *testing.T, e *env) {
	p := partitioner(t, e)
	e.holderParts(t, func(t *testing.T, e *env, a *client) { runPartitionedHolder(t, e, p, a) })
}

func runPartitionedHolder(t *testing.T, e *env, p Partitioner, a *client) {
	key := e.key("partitioned")
	b := e.locker(t)
	le := mustAcquire(t, a, key)
	cut := time.Now()
	partition(t, p, a.d)
	// The next renewal (due by TTL/3) cannot be answered; the lease must be
	// in doubt (a renewal unanswered for TTL/6) or lost well before the TTL
	// is over.
	if !waitNotHeld(le, e.ttl*3/4) {
		t.Errorf("a partitioned holder still reports the lease held %v after the cut", time.Since(cut).Round(time.Millisecond))
	}
	lb, err := b.Acquire(ctxFor(t, 4*e.ttl+30*time.Second), key)
	gotAt := time.Now()
	if err != nil {
		t.Fatalf("the partitioned holder's lock never became free: %v", err)
	}
	defer release(t, lb)
	if dl := le.Deadline(); !dl.Before(gotAt) {
		t.Errorf("the partitioned holder's lease was valid until %v, but another client held the lock at %v",
			dl.Format(time.StampMicro), gotAt.Format(time.StampMicro))
	}
	if !waitDone(le, 2*e.ttl) {
		t.Fatal("the partitioned holder's lease was never reported lost")
	}
	if !errors.Is(le.Err(), distlock.ErrLost) {
		t.Errorf("partitioned holder's Err() = %v, want ErrLost", le.Err())
	}
}

// testPartitionHealed: a partition shorter than the lease's validity is
// survived: after the heal the lease is held again (and exclusive) without
// the holder doing anything. The holder runs over the harness's client and
// over a user-made one.
func testPartitionHealed(t *testing.T, e *env) {
	p := partitioner(t, e)
	e.holderParts(t, func(t *testing.T, e *env, a *client) { runPartitionHealed(t, e, p, a) })
}

func runPartitionHealed(t *testing.T, e *env, p Partitioner, a *client) {
	key := e.key("healed")
	b := e.locker(t)
	le := mustAcquire(t, a, key)
	_, _, failedBefore := a.probe.state()
	cut := time.Now()
	heal := partition(t, p, a.d)
	// The partition lasts until the holder felt it: the lease is in doubt,
	// and a renewal failed in it, or (where the store black-holes the
	// renewal, which then waits for an answer) the renewal due by TTL/3
	// went unanswered, for which TTL/2 from the cut is the rule's time.
	if !a.probe.until(waitLimit, func(p *probe) bool {
		return p.saw(distlock.EventInDoubt, key, cut) || p.saw(distlock.EventLost, key, cut)
	}) {
		t.Fatalf("a partitioned holder's lease was never reported in doubt (state %v)", le.State())
	}
	a.probe.until(time.Until(cut.Add(e.ttl/2)), func(p *probe) bool {
		return p.failed > failedBefore || p.saw(distlock.EventLost, key, cut)
	})
	heal()
	healed := time.Now()
	if !a.probe.until(waitLimit, func(p *probe) bool {
		return p.saw(distlock.EventRestored, key, cut) || p.saw(distlock.EventLost, key, cut)
	}) {
		t.Fatalf("after the heal the lease was neither held again nor lost within %v (state %v)", waitLimit, le.State())
	}
	if heldAgain(le) != distlock.StateHeld {
		t.Fatalf("after a partition of %v (healed %v before the lease's deadline) the lease is %v (err %v), want held",
			healed.Sub(cut).Round(time.Millisecond), le.Deadline().Sub(healed).Round(time.Millisecond), le.State(), le.Err())
	}
	if isFree(t, b, key) {
		t.Fatal("another client could take the lock the healed holder still holds")
	}
	if time.Until(le.Deadline()) < e.ttl/3 {
		t.Errorf("after the heal the lease's validity was not renewed (%v left)", time.Until(le.Deadline()))
	}
	release(t, le)
}

// testLostAcquireReply: the reply to an acquisition is lost after the store
// ran it. Whatever the caller is told, no ghost is left: either the caller
// holds the lock and its release frees it at once (a retried delivery
// counted no second hold), or the driver gave back what the attempt took
// (before returning, or as soon as the store answers again where the loss
// also cost the connection), so the lock is free within 2×TTL of the
// caller's answer (the rule's bound: a driver may have to reconnect
// first), never held by a ghost for a session's life. The caller runs over the
// harness's client and over a user-made one (whose library may retry the
// request itself).
func testLostAcquireReply(t *testing.T, e *env) {
	r := replyDropper(t, e)
	e.holderParts(t, func(t *testing.T, e *env, a *client) { runLostAcquireReply(t, e, r, a) })
}

func runLostAcquireReply(t *testing.T, e *env, r ReplyDropper, a *client) {
	key := e.key("lost-acquire")
	b := e.locker(t)
	for i := range 3 {
		before := r.Dropped(a.d)
		if err := r.DropNextReply(ctxFor(t, 10*time.Second), a.d); err != nil {
			t.Fatalf("harness DropNextReply: %v", err)
		}
		le, err := a.TryAcquire(ctxFor(t, 2*e.ttl+10*time.Second), key)
		if r.Dropped(a.d) == before {
			t.Logf("round %d: no reply was dropped during the acquisition (%v)", i, err)
		}
		if err == nil {
			if isFree(t, b, key) {
				t.Fatalf("round %d: the caller was granted the lock, but another client could take it", i)
			}
			release(t, le)
			if !isFree(t, b, key) {
				t.Fatalf("round %d: the caller was granted the lock after a lost reply, and after its release the key is still held (a second hold counted?)", i)
			}
			continue
		}
		if isNotAcquired(err) {
			t.Fatalf("round %d: TryAcquire of a free key after a lost reply: %v (ErrNotAcquired: the caller's own ghost?)", i, err)
		}
		answered := time.Now()
		if !eventually(2*e.ttl, func() bool { return isFree(t, b, key) }) {
			t.Fatalf("round %d: after a lost acquire reply (caller told %v) the key stayed held by a ghost for more than 2×TTL", i, err)
		}
		t.Logf("round %d: free %v after the caller was told %v", i, time.Since(answered).Round(time.Millisecond), err)
	}
}

// testLostReleaseReply: the reply to a release is lost after the store ran
// it. The lock is freed, once: a holder that took it next keeps it, and so
// does another process's hold of the same owner. The releasing process
// runs over the harness's client and over a user-made one (whose library
// may retry the request itself).
func testLostReleaseReply(t *testing.T, e *env) {
	r := replyDropper(t, e)
	e.holderParts(t, func(t *testing.T, e *env, a *client) { runLostReleaseReply(t, e, r, a) })
}

func runLostReleaseReply(t *testing.T, e *env, r ReplyDropper, a *client) {
	b, c := e.locker(t), e.locker(t)
	key := e.key("lost-release")
	le := mustAcquire(t, a, key)
	if err := r.DropNextReply(ctxFor(t, 10*time.Second), a.d); err != nil {
		t.Fatalf("harness DropNextReply: %v", err)
	}
	err := le.Release(ctxFor(t, 2*e.ttl+10*time.Second))
	t.Logf("release with its reply lost: %v", err)
	var lb *distlock.Lease
	if !eventually(2*e.ttl+2*time.Second, func() bool {
		var aerr error
		lb, aerr = b.TryAcquire(ctxFor(t, 10*time.Second), key)
		return aerr == nil
	}) {
		t.Fatal("after a release whose reply was lost the key never became free")
	}
	// Late deliveries of a's release (client retries) must not free b's.
	heldThroughout(t, c, key, e.ttl/2, "the next holder's lock was freed: the lost release ran twice")
	release(t, lb)

	if !a.Capabilities().CrossProcessReentry {
		return
	}
	// Two processes hold with one owner: one release, with its reply lost,
	// gives back one hold only.
	key = e.key("lost-release-shared")
	la := mustAcquire(t, b, key)
	la2, err := a.TryAcquire(ctxFor(t, 10*time.Second), key, distlock.WithOwner(la.Owner()))
	if err != nil {
		t.Fatalf("cross-process re-entry: %v", err)
	}
	if err := r.DropNextReply(ctxFor(t, 10*time.Second), a.d); err != nil {
		t.Fatalf("harness DropNextReply: %v", err)
	}
	_ = la2.Release(ctxFor(t, 2*e.ttl+10*time.Second))
	heldThroughout(t, c, key, e.ttl/2, "a release with its reply lost gave back the other process's hold of the same owner")
	if la.Err() != nil {
		t.Fatalf("the other process's lease ended: %v", la.Err())
	}
	release(t, la)
}

// testLostRefreshReply: the reply to a refresh is lost. The refresh never
// extends or shortens another holder's lock: a stale holder's refresh
// (its lock was taken away behind its back) fails and leaves the new
// holder's expiry where it was.
func testLostRefreshReply(t *testing.T, e *env) {
	r := replyDropper(t, e)
	a, b, c := e.locker(t), e.locker(t), e.locker(t)
	if !a.Capabilities().PerLockTTL {
		t.Skipf("%s: locks live as long as their session; a refresh extends no one's lock", a.Capabilities().Name)
	}
	key := e.key("lost-refresh")
	stale := mustAcquire(t, a, key, distlock.WithoutAutoRenew(), distlock.WithTTL(4*e.ttl))
	if err := e.h.Delete(ctxFor(t, 10*time.Second), key); err != nil {
		t.Fatalf("harness Delete: %v", err)
	}
	var lb *distlock.Lease
	if !eventually(3*e.ttl, func() bool {
		var err error
		lb, err = b.TryAcquire(ctxFor(t, 10*time.Second), key, distlock.WithoutAutoRenew())
		return err == nil
	}) {
		t.Fatal("the deleted lock never became free")
	}
	bDeadline := lb.Deadline()
	if err := r.DropNextReply(ctxFor(t, 10*time.Second), a.d); err != nil {
		t.Fatalf("harness DropNextReply: %v", err)
	}
	if err := stale.Refresh(ctxFor(t, 2*e.ttl+10*time.Second), 4*e.ttl); err == nil {
		t.Fatal("a stale holder's refresh succeeded while another client holds the lock")
	}
	// Not shortened: held by b until b's own validity ends.
	if time.Now().Before(bDeadline.Add(-e.ttl/10)) && isFree(t, c, key) {
		t.Fatal("the new holder's lock ended before its TTL: the stale refresh shortened it")
	}
	// Not extended: free soon after b's TTL.
	if !eventually(time.Until(bDeadline)+e.ttl/2, func() bool { return isFree(t, c, key) }) {
		t.Fatal("the new holder's lock outlived its TTL: the stale refresh extended it")
	}
}
