package conformance

import (
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/distlock/distlock"
)

// The case of a holder whose lease ended while it was cut off and which
// takes locks again as soon as its path heals. A driver tracks its locks
// by session or connection, and learns of the old one's end (a session
// expired, a connection replaced) only some time after the new one began:
// on a user's connection zklock learned of it by polling, and a lock
// granted in between was taken for one of the expired session's, marked
// gone, and its Release left its node locking the key for the new
// session's life (22ce45c). The rule, whatever the driver's bookkeeping: a
// lock taken after the heal is held and exclusive until its Release, or
// reported lost; and once released it is free for others within a bound
// of TTLs, never for as long as the holder's new session or connection
// lives.

// reacquireBound is how long after the healed holder's Release (or its
// lease's loss) another client may wait for the key: a lock the driver
// failed to delete ends by its TTL, as a lost acquisition's ghost does
// (LostAcquireReply's 2×TTL, which allows for a reconnect), with a TTL
// more for a scheduler three times slower than a CI runner's.
func reacquireBound(ttl time.Duration) time.Duration { return 3 * ttl }

// reacquireRounds is how many times a case cuts the holder off and heals
// it. The moment a driver may be caught in can be short: zklock's poll of
// a user's connection looked every 100 ms, and grants tried 2 ms apart came
// after it in 2 runs of 10 (with the fix reverted); each round is another
// chance.
const reacquireRounds = 2

// testPartitionedHolderReacquires: a holder cut off past its TTL (its
// lease lost, its lock taken by a rival and given back) acquires the same
// key and another one at once after the heal, on the same Locker; each is
// held and exclusive for a TTL or reported lost meanwhile, and after its
// Release the rival gets it within reacquireBound. The holder runs over
// the harness's client and over a user-made one.
func testPartitionedHolderReacquires(t *testing.T, e *env) {
	p := partitioner(t, e)
	e.holderParts(t, func(t *testing.T, e *env, a *client) {
		b := e.locker(t)
		for round := range reacquireRounds {
			t.Logf("round %d", round)
			keys := []string{e.key(fmt.Sprintf("reacquired-%d", round)), e.key(fmt.Sprintf("reacquired-other-%d", round))}
			cutPastTTL(t, e, p, a, b, keys[0])
			healed := time.Now()
			// At once after the heal, both keys from the healed holder's
			// Locker, tried without the pauses the Locker's own backoff
			// would add, so that the grants come as soon as the store
			// answers again: in the moment a driver may not yet know its
			// old session or connection is over.
			leases := make([]*distlock.Lease, len(keys))
			var wg sync.WaitGroup
			for i, key := range keys {
				wg.Go(func() { leases[i] = reacquireAtOnce(t, a, key, healed, 4*e.ttl+30*time.Second) })
			}
			wg.Wait()
			if slices.Contains(leases, nil) {
				t.FailNow() // reacquireAtOnce said why
			}
			checkReacquired(t, e, b, leases)
		}
	})
}

// cutPastTTL takes key on a, cuts a off until its lease is lost and the
// store has ended its lock (b, a rival, gets it and gives it back), and
// heals it.
func cutPastTTL(t *testing.T, e *env, p Partitioner, a, b *client, key string) {
	le := mustAcquire(t, a, key)
	heal := partition(t, p, a.d)
	cut := time.Now()
	// The stall's bound: the lease ends at its deadline, at most a TTL
	// away, whatever the client does meanwhile.
	if !waitDone(le, 3*e.ttl+30*time.Second) {
		t.Fatalf("a holder cut off for %v still holds its lease (state %v)", time.Since(cut).Round(time.Millisecond), le.State())
	}
	if !errors.Is(le.Err(), distlock.ErrLost) {
		t.Errorf("the cut-off holder's Err() = %v, want ErrLost", le.Err())
	}
	// The store ended the cut-off holder's lock (its TTL ran out, or its
	// session expired): a rival gets it, and gives it back.
	lb, err := b.Acquire(ctxFor(t, 4*e.ttl+30*time.Second), key)
	if err != nil {
		t.Fatalf("the cut-off holder's lock never became free: %v", err)
	}
	if dl := le.Deadline(); !dl.Before(time.Now()) {
		t.Errorf("the cut-off holder's lease was valid until %v, but another client held the lock", dl.Format(time.StampMicro))
	}
	release(t, lb)
	heal()
}

// reacquireAtOnce tries key on a every 2 ms (each try bounded) until it
// is granted, for at most bound; nil, with the case failed, if it never
// is, or if a free key is refused as held.
func reacquireAtOnce(t *testing.T, a *client, key string, healed time.Time, bound time.Duration) *distlock.Lease {
	var le *distlock.Lease
	var err error
	tries := 0
	for deadline := time.Now().Add(bound); ; {
		tries++
		le, err = a.TryAcquire(ctxFor(t, 10*time.Second), key)
		if err == nil || isNotAcquired(err) || time.Now().After(deadline) {
			break
		}
		pause(2 * time.Millisecond)
	}
	switch {
	case err == nil:
		t.Logf("%s: granted to the healed holder %v after the heal (try %d)", key, time.Since(healed).Round(time.Millisecond), tries)
		return le
	case isNotAcquired(err):
		t.Errorf("%s: the healed holder was refused a key no one else holds (%v): a ghost of its own holds it", key, err)
	default:
		t.Errorf("%s: the healed holder could not acquire a free key within %v of the heal (%d tries): %v", key, bound, tries, err)
	}
	return nil
}

// checkReacquired checks the healed holder's leases: each held and
// exclusive for a TTL (b cannot take its key while it says it is held),
// or reported lost meanwhile; then released, and b gets its key within
// reacquireBound of the Release.
func checkReacquired(t *testing.T, e *env, b *client, leases []*distlock.Lease) {
	// A TTL (time must pass here: a driver catching up with its old
	// session's end, at the latest by the renewals due meanwhile, is what
	// is checked), each lease looked at every 5 ms until it ends.
	end := time.Now().Add(e.ttl)
	overlap := map[*distlock.Lease]bool{}
	for time.Now().Before(end) {
		for _, la := range leases {
			if !overlap[la] && la.State() == distlock.StateHeld && isFree(t, b, la.Key()) && la.State() == distlock.StateHeld {
				overlap[la] = true
				t.Errorf("%s: another client took the key while the healed holder's new lease was held (deadline %v away)",
					la.Key(), time.Until(la.Deadline()).Round(time.Millisecond))
			}
		}
		pause(5 * time.Millisecond)
	}
	for _, la := range leases {
		releasedFree(t, e, b, la)
	}
}

// releasedFree releases la, the healed holder's new lease, and checks
// that b gets its key within reacquireBound.
func releasedFree(t *testing.T, e *env, b *client, la *distlock.Lease) {
	key := la.Key()
	err := la.Release(ctxFor(t, 10*time.Second))
	released := time.Now()
	switch cause := la.Err(); {
	case err == nil:
	case errors.Is(cause, distlock.ErrLost):
		t.Logf("%s: the healed holder's new lease was reported lost (%v); Release: %v", key, cause, err)
	default:
		t.Errorf("%s: Release of the healed holder's new lease: %v, and the lease was not reported lost (Err %v)", key, err, cause)
	}
	bound := reacquireBound(e.ttl)
	lb, err := b.Acquire(ctxFor(t, bound), key)
	if err != nil {
		t.Errorf("%s: another client could not get the key within %v of the healed holder's Release (%v): the released lock still holds it (state %v, Err %v)",
			key, bound.Round(time.Millisecond), err, la.State(), la.Err())
		return
	}
	t.Logf("%s: another client got it %v after the healed holder's Release", key, time.Since(released).Round(time.Millisecond))
	release(t, lb)
}
