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
