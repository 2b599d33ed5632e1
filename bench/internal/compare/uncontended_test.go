package compare

import (
	"context"
	"errors"
	"math"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/distlock/distlock/bench/internal/measure"
)

// fakeStore is a store whose clients' pairs all move one fake clock: an
// acquire takes fast, or slow once the store has seen slowAfter acquires
// (of all its clients: a machine whose loopback turned slow). It counts
// what a server would: requests (a reading of its counters is one),
// fsyncs, and round trips on the wire.
type fakeStore struct {
	fast, slow time.Duration
	slowAfter  int // 0: never slow

	mu       sync.Mutex
	clock    time.Time
	acquires int
	requests float64
	fsyncs   float64
	trips    float64
	open     int // clients made and not yet closed
}

func (s *fakeStore) now() time.Time {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.clock
}

// cost is what one pair of a library costs the store.
type cost struct{ trips, requests, fsyncs float64 }

// target returns a library of the store; its client's acquire fails from
// its failAt-th call on (0: never), and making a client fails with
// newErr.
func (s *fakeStore) target(name string, c cost, failAt int, newErr error) Target {
	return Target{
		Name: "fake: " + name, Store: "fake", Library: name,
		New: func(context.Context, time.Duration) (measure.Contender, error) {
			if newErr != nil {
				return nil, newErr
			}
			s.mu.Lock()
			s.open++
			s.mu.Unlock()
			return &fakeClient{s: s, cost: c, failAt: failAt}, nil
		},
		Counters: func(context.Context) (float64, float64, error) {
			s.mu.Lock()
			defer s.mu.Unlock()
			s.requests++
			return s.requests, s.fsyncs, nil
		},
		RoundTrips: func() float64 {
			s.mu.Lock()
			defer s.mu.Unlock()
			return s.trips
		},
	}
}

type fakeClient struct {
	s      *fakeStore
	cost   cost
	failAt int
	calls  int
}

func (x *fakeClient) Acquire(context.Context, string) (func(context.Context) error, error) {
	x.calls++
	if x.failAt > 0 && x.calls >= x.failAt {
		return nil, errors.New("connection reset")
	}
	s := x.s
	s.mu.Lock()
	defer s.mu.Unlock()
	s.acquires++
	d := s.fast
	if s.slowAfter > 0 && s.acquires > s.slowAfter {
		d = s.slow
	}
	s.clock = s.clock.Add(d)
	s.trips += x.cost.trips
	s.requests += x.cost.requests
	s.fsyncs += x.cost.fsyncs
	return func(context.Context) error { return nil }, nil
}

func (x *fakeClient) Close() {
	x.s.mu.Lock()
	x.s.open--
	x.s.mu.Unlock()
}

func uncontendedOnly(s *fakeStore, iterations, rounds int) Config {
	return Config{Workloads: []string{"uncontended"}, Iterations: iterations, Rounds: rounds, clock: s.now}
}

func byName(rs []Result) map[string]Result {
	m := map[string]Result{}
	for _, r := range rs {
		m[r.Backend] = r
	}
	return m
}

// Two equal libraries of one store, and the store turns slow (0.1 ms a
// pair, then 0.3 ms) after 140 of the round's ~200 acquires. Run one
// after the other, the first would time all its pairs fast and the
// second most of its pairs slow: p50 0.1 against 0.3 ms for the same
// code. Taking turns, both time about the same share of their pairs in
// the slow phase, and their p50s and p99s are equal.
func TestUncontendedPhaseHitsTargetsAlike(t *testing.T) {
	s := &fakeStore{fast: 100 * time.Microsecond, slow: 300 * time.Microsecond, slowAfter: 140}
	ts := []Target{s.target("a", cost{}, 0, nil), s.target("b", cost{}, 0, nil)}
	res := byName(Run(context.Background(), ts, uncontendedOnly(s, 100, 1), nil))
	a, b := res["fake: a"], res["fake: b"]
	for _, m := range []string{"p50", "p99"} {
		va, _ := a.Metric(m)
		vb, _ := b.Metric(m)
		if va != vb {
			t.Errorf("%s: a %v ms, b %v ms: a slow phase hit one library more than the other", m, va, vb)
		}
	}
	if p50, _ := a.Metric("p50"); p50 != 0.1 {
		t.Errorf("p50 %v ms, want 0.1 (most pairs of each were timed before the slow phase)", p50)
	}
	if p99, _ := a.Metric("p99"); p99 != 0.3 {
		t.Errorf("p99 %v ms, want 0.3 (a quarter or more of each library's pairs were slow)", p99)
	}
	if s.open != 0 {
		t.Errorf("%d clients left open", s.open)
	}
}

// Pairs are timed taking turns, but what a pair costs is counted per
// library: the server's counters and the wire's round trips are the
// store's, so each library counts alone in a pass of its own. Every round
// keeps its figures, and every target ends each round with a step.
func TestUncontendedCountsPerTarget(t *testing.T) {
	s := &fakeStore{fast: 100 * time.Microsecond}
	ts := []Target{
		s.target("a", cost{trips: 2, requests: 3}, 0, nil),
		s.target("b", cost{trips: 4, requests: 5, fsyncs: 1}, 0, nil),
	}
	c := uncontendedOnly(s, 60, 3)
	steps := 0
	res := byName(Run(context.Background(), ts, c, func(Result, int) { steps++ }))
	if steps != c.Steps(ts) || steps != 6 {
		t.Errorf("%d steps, want 6 (Steps says %d)", steps, c.Steps(ts))
	}
	want := map[string]cost{"fake: a": {2, 3, 0}, "fake: b": {4, 5, 1}}
	for name, w := range want {
		r := res[name]
		if r.Error != "" || r.Runs != 3 {
			t.Errorf("%s: %d runs, error %q", name, r.Runs, r.Error)
		}
		for m, v := range map[string]float64{"round trips/pair": w.trips, "requests/pair": w.requests, "fsyncs/pair": w.fsyncs} {
			got, ok := r.Lookup(m)
			if !ok || got.Value != v || len(got.Rounds) != 3 || got.Min != v || got.Max != v {
				t.Errorf("%s: %s = %+v, want %v in each of 3 rounds", name, m, got, v)
			}
		}
		if got, _ := r.Lookup("pairs/s"); len(got.Rounds) != 3 || math.Abs(got.Value-1e4) > 1e-6 {
			t.Errorf("%s: pairs/s = %+v, want 10000 (0.1 ms a pair)", name, got)
		}
		if len(r.Samples) != 180 {
			t.Errorf("%s: %d samples, want 3 rounds of 60", name, len(r.Samples))
		}
	}
	if s.open != 0 {
		t.Errorf("%d clients left open", s.open)
	}
}

// A library that cannot make a client, or whose pairs start failing,
// reports its error; the others of its store still get their figures.
func TestUncontendedFailingTargets(t *testing.T) {
	s := &fakeStore{fast: 100 * time.Microsecond}
	ts := []Target{
		s.target("down", cost{}, 0, errors.New("connection refused")),
		s.target("flaky", cost{trips: 2}, 30, nil),
		s.target("good", cost{trips: 2}, 0, nil),
	}
	res := byName(Run(context.Background(), ts, uncontendedOnly(s, 100, 1), nil))
	if r := res["fake: down"]; !strings.Contains(r.Error, "connection refused") || len(r.Metrics) != 0 {
		t.Errorf("down: error %q, metrics %v", r.Error, r.Metrics)
	}
	if r := res["fake: flaky"]; !strings.Contains(r.Error, "connection reset") || len(r.Metrics) != 0 {
		t.Errorf("flaky: error %q, metrics %v", r.Error, r.Metrics)
	}
	good := res["fake: good"]
	var names []string
	for _, m := range good.Metrics {
		names = append(names, m.Name)
	}
	if good.Error != "" || !slices.Equal(names, []string{"p50", "p99", "pairs/s", "round trips/pair", "requests/pair", "fsyncs/pair"}) {
		t.Errorf("good: error %q, metrics %v", good.Error, names)
	}
	if len(good.Samples) != 100 {
		t.Errorf("good: %d samples, want 100", len(good.Samples))
	}
	if s.open != 0 {
		t.Errorf("%d clients left open", s.open)
	}
}
