package conformance

import (
	"errors"
	"testing"
	"time"

	"github.com/distlock/distlock"
	"github.com/distlock/distlock/backend"
)

// testElectionProclaim: where the store keeps a leader's value
// (Capabilities.Values), a leader's Proclaim reaches an observer and
// Leader with the term and owner unchanged; where the store also pushes
// changes (Capabilities.Watch) the observer polls once an hour, so only
// the store's push can bring each change in time: the new value, a
// resignation, the next leader. A leader whose lock was deleted in the
// store and taken by another cannot change its successor's value: its
// Proclaim fails with ErrLost or ErrNotHeld.
func testElectionProclaim(t *testing.T, e *env) {
	a, b, o := e.locker(t), e.locker(t), e.locker(t)
	caps := a.Capabilities()
	if !caps.Values {
		t.Skipf("%s keeps no value beside a lock (Capabilities.Values)", caps.Name)
	}
	name := e.key("proclaim")
	eo, expect := observeProclaims(t, e, o, name, caps)
	expect("before any campaign", distlock.LeaderInfo{})
	ea := election(t, a, name)
	proclaimAndResign(t, ea, eo, expect)

	// Deposed: the lock deleted behind the leader's back, taken by b.
	la2, err := ea.Campaign(ctxFor(t, 30*time.Second), "alpha")
	if err != nil {
		t.Fatalf("second Campaign: %v", err)
	}
	expect("elected again", distlock.LeaderInfo{Leading: true, Value: "alpha", Owner: la2.Owner(), Term: la2.Term()})
	if err := e.h.Delete(ctxFor(t, 10*time.Second), name); err != nil {
		t.Fatalf("harness Delete: %v", err)
	}
	lb, err := election(t, b, name).Campaign(ctxFor(t, 4*e.ttl+30*time.Second), "bravo")
	if err != nil {
		t.Fatalf("successor's Campaign: %v", err)
	}
	expect("successor", distlock.LeaderInfo{Leading: true, Value: "bravo", Owner: lb.Owner(), Term: lb.Term()})
	if err := la2.Proclaim(ctxFor(t, 10*time.Second), "stale"); !errors.Is(err, distlock.ErrLost) && !errors.Is(err, distlock.ErrNotHeld) {
		t.Errorf("the deposed leader's Proclaim: %v, want ErrLost or ErrNotHeld", err)
	}
	if info, err := eo.Leader(ctxFor(t, 10*time.Second)); err != nil || info.Value != "bravo" || info.Owner != lb.Owner() {
		t.Errorf("Leader() after the deposed leader's Proclaim = %+v, %v; want bravo's", info, err)
	}
	if err := lb.Proclaim(ctxFor(t, 10*time.Second), "bravo-2"); err != nil {
		t.Fatalf("successor's Proclaim: %v", err)
	}
	expect("successor proclaimed", distlock.LeaderInfo{Leading: true, Value: "bravo-2", Owner: lb.Owner(), Term: lb.Term()})
	if err := lb.Resign(ctxFor(t, 10*time.Second)); err != nil {
		t.Fatalf("successor's Resign: %v", err)
	}
	expect("successor resigned", distlock.LeaderInfo{})
}

// observeProclaims makes o's Election on name and observes it, polling
// once an hour where the store pushes changes (caps.Watch), else every
// quarter TTL, and returns it with expect, which waits for the observer
// to report want (Leading false: none), what naming the step.
func observeProclaims(t *testing.T, e *env, o *client, name string, caps backend.Capabilities) (*distlock.Election, func(what string, want distlock.LeaderInfo)) {
	t.Helper()
	interval, within := time.Hour, 2*e.ttl+5*time.Second
	if !caps.Watch {
		interval = e.ttl / 4
	}
	eo := election(t, o, name, distlock.WithObserveInterval(interval))
	obs, err := eo.Observe(ctxFor(t, 2*time.Minute))
	if err != nil {
		t.Fatalf("Observe: %v", err)
	}
	// expect waits for the observer to report want (Leading false: none).
	expect := func(what string, want distlock.LeaderInfo) {
		t.Helper()
		timeout := time.After(within)
		var seen []distlock.LeaderInfo
		for {
			select {
			case got, ok := <-obs:
				if !ok {
					t.Fatalf("%s: Observe's channel closed; saw %+v", what, seen)
				}
				seen = append(seen, got)
				if got.Leading == want.Leading && got.Value == want.Value && got.Owner == want.Owner && (got.Term == 0 || got.Term == want.Term) {
					return
				}
			case <-timeout:
				t.Fatalf("%s: Observe (interval %v, watch %v) did not report %+v within %v; it reported %+v", what, interval, caps.Watch, want, within, seen)
			}
		}
	}
	return eo, expect
}

// proclaimAndResign campaigns on ea as "alpha", proclaims two values,
// each reaching the observer (expect) and eo's Leader with the term and
// owner unchanged, refuses an invalid value, and resigns, after which
// Proclaim fails with ErrReleased.
func proclaimAndResign(t *testing.T, ea, eo *distlock.Election, expect func(what string, want distlock.LeaderInfo)) {
	t.Helper()
	la, err := ea.Campaign(ctxFor(t, 30*time.Second), "alpha")
	if err != nil {
		t.Fatalf("Campaign: %v", err)
	}
	term, owner := la.Term(), la.Owner()
	expect("elected", distlock.LeaderInfo{Leading: true, Value: "alpha", Owner: owner, Term: term})
	for _, v := range []string{"alpha-2", "alpha-3"} {
		if err := la.Proclaim(ctxFor(t, 10*time.Second), v); err != nil {
			t.Fatalf("Proclaim(%q): %v", v, err)
		}
		expect("proclaimed "+v, distlock.LeaderInfo{Leading: true, Value: v, Owner: owner, Term: term})
	}
	if la.Value() != "alpha-3" || la.Term() != term || la.Owner() != owner {
		t.Errorf("Leadership after Proclaim: value %q, term %d, owner %q; want alpha-3, %d, %q", la.Value(), la.Term(), la.Owner(), term, owner)
	}
	if info, err := eo.Leader(ctxFor(t, 10*time.Second)); err != nil || info.Value != "alpha-3" || (info.Term != 0 && info.Term != term) {
		t.Errorf("Leader() after Proclaim = %+v, %v; want alpha-3 with term %d", info, err, term)
	}
	if err := la.Proclaim(ctxFor(t, 10*time.Second), "bad value"); !errors.Is(err, distlock.ErrInvalidConfig) {
		t.Errorf("Proclaim with a space: %v, want ErrInvalidConfig", err)
	}
	if err := la.Resign(ctxFor(t, 10*time.Second)); err != nil {
		t.Fatalf("Resign: %v", err)
	}
	expect("resigned", distlock.LeaderInfo{})
	if err := la.Proclaim(ctxFor(t, 10*time.Second), "late"); !errors.Is(err, distlock.ErrReleased) {
		t.Errorf("Proclaim after Resign: %v, want ErrReleased", err)
	}
}
