package zklock

import (
	"errors"
	"io"
	"net"
	"strings"
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

// leaderIndex returns the index of the ensemble's leader, asked with the
// "srvr" four-letter command (go-zookeeper's FLWSrvr cannot parse the
// version line of ZooKeeper 3.8).
func leaderIndex(t *testing.T, c *cluster) int {
	t.Helper()
	leader := -1
	ok := eventually(30*time.Second, func() bool {
		for i, addr := range c.g.Addrs() {
			if strings.Contains(fourLetter(addr, "srvr"), "Mode: leader") {
				leader = i
				return true
			}
		}
		return false
	})
	if !ok {
		t.Fatal("no leader found")
	}
	return leader
}

// fourLetter sends a four-letter command and returns the answer ("" on error).
func fourLetter(addr, cmd string) string {
	conn, err := net.DialTimeout("tcp", addr, 2*time.Second)
	if err != nil {
		return ""
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(2 * time.Second))
	if _, err := conn.Write([]byte(cmd)); err != nil {
		return ""
	}
	out, _ := io.ReadAll(conn)
	return string(out)
}
