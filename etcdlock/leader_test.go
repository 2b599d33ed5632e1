package etcdlock_test

import (
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/distlock/distlock"
)

// electionTimeout is the sandbox's etcd election timeout.
const electionTimeout = time.Second

// leaderTTL is the lease TTL of TestLeaderKilled: long enough for leases
// to be renewed across an election (etcd's 2 s minimum is not: with a 1 s
// election timeout, renewals can fail for longer than 2 s, and every
// client then rightly gives its lease up).
const leaderTTL = 5 * time.Second

// TestLeaderKilled kills the etcd leader while a lock is held and two
// clients wait: the lock is never held twice, the waiters keep their place,
// and the hand-off after the release happens within TTL + election timeout.
func TestLeaderKilled(t *testing.T) {
	if testing.Short() {
		t.Skip("3-member cluster: skipped in -short mode")
	}
	c := startCluster(t, 3)
	key := fmt.Sprintf("leader-%d", time.Now().UnixNano())
	a, ad := lockerTTL(t, leaderTTL, c.g.Addrs()...)
	b, _ := lockerTTL(t, leaderTTL, c.g.Addrs()...)
	w, _ := lockerTTL(t, leaderTTL, c.g.Addrs()...)
	la, err := a.Acquire(ctxT(t, 10*time.Second), key)
	if err != nil {
		t.Fatal(err)
	}
	// current is the lease the clients believe held; a new holder finding
	// the previous one still valid is a double grant.
	var current atomic.Pointer[distlock.Lease]
	current.Store(la)
	type result struct {
		name string
		at   time.Time
		err  error
	}
	results := make(chan result, 2)
	wait := func(name string, l *distlock.Locker) {
		le, err := l.Acquire(ctxT(t, 60*time.Second), key)
		at := time.Now()
		if err == nil {
			if prev := current.Swap(le); prev != nil && prev.Err() == nil {
				t.Errorf("%s got the lock while %s's lease was still valid", name, prev.Key())
			}
			select {
			case <-time.After(100 * time.Millisecond):
			case <-le.Done():
				t.Logf("%s's lease ended while held: %v", name, le.Err())
			}
			current.CompareAndSwap(le, nil)
			if rerr := le.Release(ctxT(t, 10*time.Second)); rerr != nil {
				t.Logf("%s: release: %v", name, rerr)
			}
		}
		results <- result{name, at, err}
	}
	go wait("b", b)
	queued(t, ad, key, 2)
	go wait("c", w)
	queued(t, ad, key, 3)

	leader := findLeader(t, c)
	t.Logf("killing the leader, %s", c.g.Node(leader).Name())
	if err := c.g.Node(leader).Kill(ctxT(t, 30*time.Second)); err != nil {
		t.Fatal(err)
	}
	time.Sleep(electionTimeout / 2)
	if la.Err() != nil {
		t.Logf("the holder's lease ended during the election: %v", la.Err())
	}
	current.CompareAndSwap(la, nil)
	released := time.Now()
	if err := la.Release(ctxT(t, 30*time.Second)); err != nil {
		t.Logf("release during the election: %v", err)
	}
	first := <-results
	second := <-results
	for _, r := range []result{first, second} {
		if r.err != nil {
			t.Errorf("waiter %s: %v", r.name, r.err)
		}
	}
	if first.name != "b" {
		t.Errorf("waiter %s got the lock first; b queued first", first.name)
	}
	latency := first.at.Sub(released)
	t.Logf("hand-off after the release: %v", latency)
	if bound := leaderTTL + electionTimeout; latency > bound+time.Second {
		t.Errorf("hand-off took %v, beyond TTL + election timeout (%v) plus a second of slack", latency, bound)
	}
}

// findLeader returns the index of the cluster's leader.
func findLeader(t *testing.T, c *cluster) int {
	t.Helper()
	leader, err := c.g.Leader(ctxT(t, 30*time.Second), "")
	if err != nil {
		t.Fatal(err)
	}
	return leader
}
