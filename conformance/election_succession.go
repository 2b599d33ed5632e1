package conformance

import (
	"errors"
	"testing"
	"time"

	"github.com/distlock/distlock"
	"github.com/distlock/distlock/backend"
)

// testElectionSuccession: a leader whose client dies is replaced within
// the store's bound, after its own client reported the loss (where the
// store frees a lock only by TTL or session); a resigning leader is
// replaced at once; a closed one too; terms increase; Observe reports
// each change.
func testElectionSuccession(t *testing.T, e *env) {
	name := e.key("succession")
	a, b, c, o := e.locker(t), e.locker(t), e.locker(t), e.locker(t)
	ea := election(t, a, name)
	la, err := ea.Campaign(ctxFor(t, 30*time.Second), "alpha")
	if err != nil {
		t.Fatalf("first Campaign: %v", err)
	}
	eo, expect := observeSuccession(t, o, name, e.ttl/4)
	expect(distlock.LeaderInfo{Leading: true, Value: "alpha", Term: la.Term()}, 2*e.ttl+5*time.Second)

	wins := campaignRivals(t, e, name, []rival{{b, "bravo"}, {c, "charlie"}})
	e.inLine(t, b, 1, o.d, Mutex, name, 1) // both in line
	e.inLine(t, c, 1, o.d, Mutex, name, 2)
	first := succeedDeadLeader(t, e, a, la, wins)
	expect(distlock.LeaderInfo{Leading: true, Value: first.ld.Value(), Term: first.ld.Term()}, 2*e.ttl+5*time.Second)

	// Resignation: the other candidate takes office at once.
	second := succeedResigned(t, e, first.ld, wins)
	expect(distlock.LeaderInfo{Leading: true, Value: second.ld.Value(), Term: second.ld.Term()}, 2*e.ttl+5*time.Second)

	// A leader whose Locker closes leaves office; nobody leads then.
	closer := b
	if second.ld.Value() == "charlie" {
		closer = c
	}
	if err := closer.Close(); err != nil {
		t.Errorf("Close of the leader's Locker: %v", err)
	}
	if err := second.ld.Err(); !errors.Is(err, distlock.ErrReleased) && !errors.Is(err, distlock.ErrClosed) {
		t.Errorf("after its Locker closed the leadership's Err() = %v, want ErrReleased", err)
	}
	expect(distlock.LeaderInfo{}, 2*e.ttl+5*time.Second)
	if hasInspector(o) {
		if _, err := eo.Leader(ctxFor(t, 10*time.Second)); !errors.Is(err, distlock.ErrNoLeader) {
			t.Errorf("Leader() with nobody in office: %v, want ErrNoLeader", err)
		}
	}
}

// observeSuccession makes o's Election on name, observing every interval
// where o's driver reads a lock's holder (elsewhere it checks that Observe
// answers ErrUnsupported), and returns it with expect, which waits for the
// observer to report want (Leading false: none); without an observer,
// expect checks nothing.
func observeSuccession(t *testing.T, o *client, name string, interval time.Duration) (*distlock.Election, func(want distlock.LeaderInfo, within time.Duration)) {
	t.Helper()
	var obs <-chan distlock.LeaderInfo
	var err error
	eo := election(t, o, name, distlock.WithObserveInterval(interval))
	if hasInspector(o) {
		if obs, err = eo.Observe(ctxFor(t, 2*time.Minute)); err != nil {
			t.Fatalf("Observe: %v", err)
		}
	} else if _, err := eo.Observe(ctxFor(t, 10*time.Second)); !errors.Is(err, distlock.ErrUnsupported) {
		t.Errorf("Observe on a store that declares no Inspect: %v, want ErrUnsupported", err)
	}
	// expect waits for the observer to report want (Leading false: none).
	expect := func(want distlock.LeaderInfo, within time.Duration) {
		t.Helper()
		if obs == nil {
			return
		}
		timeout := time.After(within)
		var last []distlock.LeaderInfo
		for {
			select {
			case got, ok := <-obs:
				if !ok {
					t.Fatalf("Observe's channel closed early; saw %+v", last)
				}
				last = append(last, got)
				if got.Leading == want.Leading && got.Value == want.Value && (got.Term == 0 || got.Term == want.Term) {
					return
				}
			case <-timeout:
				t.Fatalf("Observe did not report %+v within %v; it reported %+v", want, within, last)
			}
		}
	}
	return eo, expect
}

// rival is a candidate of the succession case: its client and value.
type rival struct {
	c     *client
	value string
}

// won is a rival's campaign ended: its leadership and when it took office,
// or its error.
type won struct {
	ld  *distlock.Leadership
	at  time.Time
	err error
}

// campaignRivals starts each rival's campaign on name; their outcomes
// come on the channel returned, as they end.
func campaignRivals(t *testing.T, e *env, name string, rivals []rival) <-chan won {
	wins := make(chan won, len(rivals))
	for _, cand := range rivals {
		el := election(t, cand.c, name)
		go func() {
			ld, err := el.Campaign(ctxFor(t, 8*e.ttl+30*time.Second), cand.value)
			wins <- won{ld, time.Now(), err}
		}()
	}
	return wins
}

// succeedDeadLeader kills the client of a, whose leadership is la, and
// returns the rival that took office after it: not before la's deadline
// (where the store frees a lock only by TTL or session), with a greater
// term, once la's client reported the leadership lost.
func succeedDeadLeader(t *testing.T, e *env, a *client, la *distlock.Leadership, wins <-chan won) won {
	t.Helper()
	if err := e.h.Kill(ctxFor(t, 10*time.Second), a.d); err != nil {
		t.Fatalf("harness Kill: %v", err)
	}
	var first won
	select {
	case first = <-wins:
	case <-time.After(4*e.ttl + 10*time.Second):
		t.Fatal("no successor took office after the leader's client died")
	}
	if first.err != nil {
		t.Fatalf("successor's Campaign: %v", first.err)
	}
	if a.Capabilities().Lifetime != backend.LifetimeConnection {
		if dl := la.Lease().Deadline(); !dl.Before(first.at) {
			t.Errorf("the dead leader's term was valid until %v, but a successor took office at %v",
				dl.Format(time.StampMicro), first.at.Format(time.StampMicro))
		}
	}
	select {
	case <-la.Done():
	case <-time.After(2*e.ttl + 5*time.Second):
		t.Fatal("the dead leader's client never reported the leadership lost")
	}
	if !errors.Is(la.Err(), distlock.ErrLost) {
		t.Errorf("dead leader's Err() = %v, want ErrLost", la.Err())
	}
	if first.ld.Term() <= la.Term() {
		t.Errorf("successor's term %d is not above the dead leader's %d", first.ld.Term(), la.Term())
	}
	return first
}

// succeedResigned resigns the leadership ld and returns the rival that
// took office after it: well within the TTL, with a greater term.
func succeedResigned(t *testing.T, e *env, ld *distlock.Leadership, wins <-chan won) won {
	t.Helper()
	resigned := time.Now()
	if err := ld.Resign(ctxFor(t, 10*time.Second)); err != nil {
		t.Fatalf("Resign: %v", err)
	}
	if !errors.Is(ld.Err(), distlock.ErrReleased) {
		t.Errorf("after Resign Err() = %v, want ErrReleased", ld.Err())
	}
	var second won
	select {
	case second = <-wins:
	case <-time.After(2*e.ttl + 5*time.Second):
		t.Fatal("no candidate took office after the leader resigned")
	}
	if second.err != nil {
		t.Fatalf("second successor's Campaign: %v", second.err)
	}
	if took := second.at.Sub(resigned); took > e.ttl {
		t.Errorf("the next candidate took office %v after the resignation, want well within the TTL %v", took, e.ttl)
	}
	if second.ld.Term() <= ld.Term() {
		t.Errorf("term %d after the resignation is not above %d", second.ld.Term(), ld.Term())
	}
	return second
}
