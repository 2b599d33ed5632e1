package conformance

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/distlock/distlock"
	"github.com/distlock/distlock/backend"
)

// Cases for leader election (Locker.Election), which the portable layer
// builds on the mutex, so they run on every backend. Leader and Observe
// need the driver to read a lock's holder (Capabilities.Inspect); where it
// does not, those checks are replaced by one that they answer
// ErrUnsupported.

// hasInspector reports whether c's driver can read a lock's holder
// (Capabilities.Inspect).
func hasInspector(c *client) bool { return c.Capabilities().Inspect }

// election makes c's Election on name or fails the case.
func election(t *testing.T, c *client, name string, opts ...distlock.ElectionOption) *distlock.Election {
	t.Helper()
	el, err := c.Election(name, opts...)
	if err != nil {
		t.Fatalf("Election(%q): %v", name, err)
	}
	return el
}

// testElectionOneLeader: many candidates on several Lockers (some with the
// same value) campaign and resign in rounds; their terms of office never
// overlap, each term is strictly greater than the one before, and Leader
// reports the one in office.
func testElectionOneLeader(t *testing.T, e *env) {
	const lockers, perLocker, rounds = 3, 2, 3
	name := e.key("election")
	type term struct {
		start, end time.Time
		term       uint64
		who        string
	}
	var (
		inside, overlap atomic.Int32
		mu              sync.Mutex
		terms           []term
		wg              sync.WaitGroup
	)
	for i := range lockers {
		c := e.locker(t)
		for j := range perLocker {
			value := fmt.Sprintf("cand-%d-%d", i, j)
			if j == 0 {
				value = "same-value" // one per Locker: distinct candidates all the same
			}
			el := election(t, c, name)
			wg.Go(func() {
				for r := range rounds {
					ld, err := el.Campaign(ctxFor(t, 60*time.Second), value)
					if err != nil {
						t.Errorf("Campaign(%q): %v", value, err)
						return
					}
					start := time.Now()
					if inside.Add(1) != 1 {
						overlap.Add(1)
					}
					if r == 0 && hasInspector(c) {
						info, err := el.Leader(ctxFor(t, 10*time.Second))
						if err != nil || !info.Leading || info.Value != value || info.Owner != ld.Owner() || (info.Term != 0 && info.Term != ld.Term()) {
							t.Errorf("Leader() while %q leads with term %d = %+v, %v", value, ld.Term(), info, err)
						}
					}
					work(time.Millisecond)
					inside.Add(-1)
					end := time.Now()
					mu.Lock()
					terms = append(terms, term{start, end, ld.Term(), value})
					mu.Unlock()
					if err := ld.Resign(ctxFor(t, 10*time.Second)); err != nil {
						t.Errorf("Resign: %v", err)
						return
					}
				}
			})
		}
	}
	wg.Wait()
	if n := overlap.Load(); n > 0 {
		t.Errorf("%d candidates took office while another was leader", n)
	}
	slices.SortFunc(terms, func(a, b term) int { return a.start.Compare(b.start) })
	for i := 1; i < len(terms); i++ {
		p, c := terms[i-1], terms[i]
		if c.start.Before(p.end) {
			t.Errorf("terms of office overlap: %q [%v, %v] and %q from %v", p.who, p.start.Format(time.StampMicro),
				p.end.Format(time.StampMicro), c.who, c.start.Format(time.StampMicro))
		}
		if c.term <= p.term {
			t.Errorf("term %d of %q is not above the previous leader %q's term %d", c.term, c.who, p.who, p.term)
		}
	}
	if want := lockers * perLocker * rounds; len(terms) != want {
		t.Errorf("%d terms of office, want %d", len(terms), want)
	}
}

// testElectionSuccession: a leader whose client dies is replaced within
// the store's bound, after its own client reported the loss (where the
// store frees a lock only by TTL or session); a resigning leader is
// replaced at once; a closed one too; terms increase; Observe reports
// each change.
func testElectionSuccession(t *testing.T, e *env) {
	name := e.key("succession")
	a, b, c, o := e.locker(t), e.locker(t), e.locker(t), e.locker(t)
	obsInterval := e.ttl / 4
	ea := election(t, a, name)
	la, err := ea.Campaign(ctxFor(t, 30*time.Second), "alpha")
	if err != nil {
		t.Fatalf("first Campaign: %v", err)
	}
	var obs <-chan distlock.LeaderInfo
	eo := election(t, o, name, distlock.WithObserveInterval(obsInterval))
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
	expect(distlock.LeaderInfo{Leading: true, Value: "alpha", Term: la.Term()}, 2*e.ttl+5*time.Second)

	type won struct {
		ld  *distlock.Leadership
		at  time.Time
		err error
	}
	wins := make(chan won, 2)
	for _, cand := range []struct {
		c     *client
		value string
	}{{b, "bravo"}, {c, "charlie"}} {
		el := election(t, cand.c, name)
		go func() {
			ld, err := el.Campaign(ctxFor(t, 8*e.ttl+30*time.Second), cand.value)
			wins <- won{ld, time.Now(), err}
		}()
	}
	e.inLine(t, b, 1, o.d, Mutex, name, 1) // both in line
	e.inLine(t, c, 1, o.d, Mutex, name, 2)
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
	expect(distlock.LeaderInfo{Leading: true, Value: first.ld.Value(), Term: first.ld.Term()}, 2*e.ttl+5*time.Second)

	// Resignation: the other candidate takes office at once.
	resigned := time.Now()
	if err := first.ld.Resign(ctxFor(t, 10*time.Second)); err != nil {
		t.Fatalf("Resign: %v", err)
	}
	if !errors.Is(first.ld.Err(), distlock.ErrReleased) {
		t.Errorf("after Resign Err() = %v, want ErrReleased", first.ld.Err())
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
	if second.ld.Term() <= first.ld.Term() {
		t.Errorf("term %d after the resignation is not above %d", second.ld.Term(), first.ld.Term())
	}
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

// testElectionRules: candidate values are checked; one Election
// campaigns once at a time; a campaign that gives up leaves nothing
// queued; resigning twice is an error; a resigned Election may campaign
// again, with a greater term.
func testElectionRules(t *testing.T, e *env) {
	name := e.key("rules")
	a, b := e.locker(t), e.locker(t)
	el := election(t, a, name)
	for _, v := range []string{"", "has space", "tab\there", "caf\u00e9", strings.Repeat("v", distlock.MaxCandidateValueLen+1)} {
		if _, err := el.Campaign(ctxFor(t, 10*time.Second), v); !errors.Is(err, distlock.ErrInvalidConfig) {
			t.Errorf("Campaign with value %q: %v, want ErrInvalidConfig", v, err)
		}
	}
	if _, err := a.Election(""); !errors.Is(err, distlock.ErrInvalidKey) {
		t.Errorf("Election with an empty name: %v, want ErrInvalidKey", err)
	}
	if hasInspector(a) {
		if _, err := el.Leader(ctxFor(t, 10*time.Second)); !errors.Is(err, distlock.ErrNoLeader) {
			t.Errorf("Leader() before any campaign: %v, want ErrNoLeader", err)
		}
	} else if _, err := el.Leader(ctxFor(t, 10*time.Second)); !errors.Is(err, distlock.ErrUnsupported) {
		t.Errorf("Leader() on a store that declares no Inspect: %v, want ErrUnsupported", err)
	}
	long := strings.Repeat("v", distlock.MaxCandidateValueLen)
	ld, err := el.Campaign(ctxFor(t, 30*time.Second), long)
	if err != nil {
		t.Fatalf("Campaign with a value of the maximum length: %v", err)
	}
	if _, err := el.Campaign(ctxFor(t, 10*time.Second), "again"); !errors.Is(err, distlock.ErrCampaigning) {
		t.Errorf("a second Campaign while leading: %v, want ErrCampaigning", err)
	}
	if got := el.Leadership(); got != ld {
		t.Errorf("Leadership() = %p, want the current one %p", got, ld)
	}
	if hasInspector(a) {
		info, err := el.Leader(ctxFor(t, 10*time.Second))
		if err != nil || info.Value != long || (info.Term != 0 && info.Term != ld.Term()) {
			t.Errorf("Leader() = %+v, %v; want the long value with term %d", info, err, ld.Term())
		}
	}
	// A campaign that gives up while another leads leaves nothing behind.
	other := election(t, b, name)
	if _, err := other.Campaign(ctxFor(t, e.ttl/2), "quitter"); err == nil {
		t.Fatal("a second candidate took office while the first leads")
	}
	if err := ld.Resign(ctxFor(t, 10*time.Second)); err != nil {
		t.Fatalf("Resign: %v", err)
	}
	if err := ld.Resign(ctxFor(t, 10*time.Second)); !errors.Is(err, distlock.ErrReleased) {
		t.Errorf("Resign twice: %v, want ErrReleased", err)
	}
	if el.Leadership() != nil {
		t.Error("Leadership() is not nil after Resign")
	}
	if !isFree(t, b, name) {
		t.Error("after the leader resigned and the other campaign gave up, the election's lock is not free")
	}
	ld2, err := el.Campaign(ctxFor(t, 30*time.Second), "again")
	if err != nil {
		t.Fatalf("Campaign after Resign: %v", err)
	}
	if ld2.Term() <= ld.Term() {
		t.Errorf("term %d of the second campaign is not above the first's %d", ld2.Term(), ld.Term())
	}
	if err := ld2.Resign(ctxFor(t, 10*time.Second)); err != nil {
		t.Errorf("Resign: %v", err)
	}
}

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
	expect("before any campaign", distlock.LeaderInfo{})
	ea := election(t, a, name)
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
