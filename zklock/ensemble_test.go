package zklock

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/distlock/distlock"
)

// TestLeaderKilled: in a 3-node ensemble, killing the leader while a lock is
// held and others wait never grants the lock twice: the holder keeps it or
// is told it lost it before anyone else holds it.
func TestLeaderKilled(t *testing.T) {
	c := startCluster(t, 3)
	key := uniqueKey(t)
	const session = 4 * time.Second
	holder := newClient(t, c, session)
	lh, err := holder.Acquire(ctxFor(t, 10*time.Second), key)
	if err != nil {
		t.Fatal(err)
	}
	type grant struct {
		at time.Time
		le *distlock.Lease
	}
	grants := make(chan grant, 3)
	var wg sync.WaitGroup
	for range 3 {
		w := newClient(t, c, session)
		wg.Go(func() {
			l, err := w.Acquire(ctxFor(t, 90*time.Second), key)
			if errors.Is(err, distlock.ErrLost) {
				// The session expired during the election: queue again.
				t.Logf("waiter lost its place: %v", err)
				l, err = w.Acquire(ctxFor(t, 90*time.Second), key)
			}
			if err != nil {
				t.Errorf("waiter: %v", err)
				return
			}
			grants <- grant{time.Now(), l}
			time.Sleep(50 * time.Millisecond)
			_ = l.Release(ctxFor(t, 10*time.Second))
		})
	}
	waitQueue(t, c, key, 4)
	leader := leaderIndex(t, c)
	t.Logf("killing the leader, node %d", leader)
	if err := c.g.Node(leader).Kill(ctxFor(t, time.Minute)); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.g.Node(leader).Start(ctxFor(t, 2*time.Minute)) })
	time.Sleep(2 * session)
	released := time.Now()
	kept := lh.Err() == nil
	if kept {
		t.Logf("holder kept the lease through the election")
		if err := lh.Release(ctxFor(t, 20*time.Second)); err != nil {
			t.Logf("release after the election: %v", err)
		}
	} else {
		t.Logf("holder lost the lease during the election: %v", lh.Err())
	}
	wg.Wait()
	close(grants)
	for g := range grants {
		if kept && g.at.Before(released) {
			t.Errorf("a waiter got the lock at %v while the holder still held it (released %v)", g.at, released)
		}
		if !kept && !lh.Deadline().Before(g.at) {
			t.Errorf("a waiter got the lock at %v, before the lost holder's deadline %v", g.at, lh.Deadline())
		}
	}
}

// leaderIndex returns the index of the ensemble's leader.
func leaderIndex(t testing.TB, c *cluster) int {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	leader, err := c.g.Leader(ctx, "")
	if err != nil {
		t.Fatal(err)
	}
	return leader
}

// TestStaleFollowerRefresh: a holder connected to a follower F must not
// have its lease extended by F while F cannot reach the leader.
//
// The scenario: A holds a lock with a 1 s session through F only; B waits
// through F2 with a long session. The leader and F2 are paused for 1.8 s:
// shorter than syncLimit (2.5 s), so F still believes it follows the leader
// and answers reads and pings from its own state, longer than A's session,
// so when the leader resumes, it has heard nothing of A's session for more
// than its timeout (F had nobody to forward A's pings to), expires it,
// deletes A's node and B is granted the lock. A refresh that F answers
// locally (a plain Exists) succeeds during the pause and extends A's
// validity past B's grant: two holders. A refresh that must reach the
// leader (Sync first) does not complete, so A's validity ends about one
// session timeout after the pause began, before the leader can expire the
// session.
//
// With two leases A renews both in one round (RefreshAll: a Sync, one
// Exists, the other judged by its node's watch), which must not extend
// either on F's stale copy either.
func TestStaleFollowerRefresh(t *testing.T) {
	c := startCluster(t, 3)
	if err := c.g.Wait(ctxFor(t, time.Minute)); err != nil {
		t.Fatal(err)
	}
	for _, leases := range []int{1, 2} {
		t.Run(fmt.Sprintf("%d-leases", leases), func(t *testing.T) { staleFollowerRefresh(t, c, leases) })
	}
}

func staleFollowerRefresh(t *testing.T, c *cluster, leases int) {
	leader := leaderIndex(t, c)
	f, f2 := (leader+1)%3, (leader+2)%3
	addrs := c.g.Addrs()
	key := uniqueKey(t)
	const sessionA, pauseFor = time.Second, 1800 * time.Millisecond
	a := newClientAt(t, c, sessionA, addrs[f:f+1])
	b := newClientAt(t, c, 10*time.Second, addrs[f2:f2+1])
	la, err := a.Acquire(ctxFor(t, 10*time.Second), key)
	if err != nil {
		t.Fatal(err)
	}
	for i := 1; i < leases; i++ { // renewed in the same rounds as la
		if _, err := a.Acquire(ctxFor(t, 10*time.Second), fmt.Sprintf("%s-%d", key, i)); err != nil {
			t.Fatal(err)
		}
	}
	granted := grantedAt(t, b, key)
	waitQueue(t, c, key, 2)
	time.Sleep(sessionA) // a few renewals in normal operation

	// Sample the validity A claims while its lease is not reported lost.
	var mu sync.Mutex
	var claimed time.Time
	stop := make(chan struct{})
	sampled := make(chan struct{})
	go func() {
		defer close(sampled)
		for {
			dl, err := la.Deadline(), la.Err()
			if err == nil {
				mu.Lock()
				if dl.After(claimed) {
					claimed = dl
				}
				mu.Unlock()
			}
			select {
			case <-stop:
				return
			case <-time.After(5 * time.Millisecond):
			}
		}
	}()

	pausedAt := time.Now()
	for _, i := range []int{f2, leader} {
		if err := c.pause(ctxFor(t, 30*time.Second), i); err != nil {
			t.Fatal(err)
		}
	}
	t.Cleanup(func() {
		for _, i := range []int{leader, f2} {
			_ = c.resume(ctxFor(t, 30*time.Second), i)
		}
	})
	time.Sleep(pauseFor - time.Since(pausedAt))
	for _, i := range []int{leader, f2} {
		if err := c.resume(ctxFor(t, 30*time.Second), i); err != nil {
			t.Fatal(err)
		}
	}
	resumedAt := time.Now()
	tb, ok := <-granted
	close(stop)
	<-sampled
	if !ok {
		t.Fatal("b never got the lock")
	}
	mu.Lock()
	defer mu.Unlock()
	t.Logf("paused %v; b granted %v after the resume; a claimed validity until %v after the pause began; a: %v",
		resumedAt.Sub(pausedAt).Round(time.Millisecond), tb.Sub(resumedAt).Round(time.Millisecond),
		claimed.Sub(pausedAt).Round(time.Millisecond), la.Err())
	if claimed.After(tb) {
		t.Errorf("a's lease claimed validity until %v, %v after b was granted the lock: refreshed by a follower cut off from the leader",
			claimed.Format(time.StampMicro), claimed.Sub(tb).Round(time.Millisecond))
	}
}
