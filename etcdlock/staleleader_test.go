package etcdlock_test

import (
	"context"
	"os"
	"slices"
	"sync"
	"testing"
	"time"

	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
)

// TestStaleLeaderRevokesLiveLease checks the etcd server for the stale
// leader's lease revocation of etcd-io/etcd#15247: a leader whose process
// was stopped past a lease's TTL (SIGSTOP here; a frozen VM or a stalled
// host in production) revokes, as it resumes and before it steps down, the
// leases its own countdown saw expire, and the revocation is applied
// although the owner kept renewing the lease through the new leader. The
// owner's last renewal succeeded less than a TTL ago, so it (like the
// driver) believes its keys are there: a lock held on such a lease is
// granted to the next waiter while its holder still holds it. This is the
// overlap the fault suite's etcd3 target reported in session 7 (a member
// paused 2.59 s with a 2 s TTL; fencing rejected the old holder's write).
//
// The fix of etcd-io/etcd#16822 (in etcd 3.7.3, say) does not cover a
// stopped process: its leadership check is skipped while the member's
// raft loop ticked lately (EtcdServer.isActive), which it does at once on
// resuming. Seen here on 3.4.23 and on 3.7.3 (DISTLOCK_ETCD_BIN) alike,
// in about 1 run in 4 with DISTLOCK_ETCD_STALE_LEADER=followers (the
// client reaches only the members that are not the leader); =1 reaches
// every member, as the driver's clients do. It is not run otherwise: the
// library cannot fix it (docs/etcd.md, "Failover").
func TestStaleLeaderRevokesLiveLease(t *testing.T) {
	if os.Getenv("DISTLOCK_ETCD_STALE_LEADER") == "" {
		t.Skip("set DISTLOCK_ETCD_STALE_LEADER=1 to check the etcd server for etcd-io/etcd#15247")
	}
	cl := startCluster(t, 3)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	leader, err := cl.g.Leader(ctx, "")
	if err != nil {
		t.Fatal(err)
	}
	addrs := cl.g.Addrs()
	endpoints := addrs // as the driver: every member, the leader too
	if os.Getenv("DISTLOCK_ETCD_STALE_LEADER") == "followers" {
		endpoints = slices.Delete(slices.Clone(addrs), leader, leader+1)
	}
	c, err := clientv3.New(clientv3.Config{Endpoints: endpoints, DialTimeout: 10 * time.Second, Logger: zap.NewNop()})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	const ttl = 2
	const key = "stale-leader/key"
	lease, err := c.Grant(ctx, ttl)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Put(ctx, key, "v", clientv3.WithLease(lease.ID)); err != nil {
		t.Fatal(err)
	}
	// Renew through the followers (one of which becomes the leader) every
	// third of the TTL, as the driver does, and note when the last renewal
	// that succeeded was sent: the server keeps the lease a TTL from then.
	kctx, kcancel := context.WithCancel(ctx)
	defer kcancel()
	var mu sync.Mutex
	lastOK := time.Now()
	done := make(chan struct{})
	go func() {
		defer close(done)
		for kctx.Err() == nil {
			sent := time.Now()
			rctx, rcancel := context.WithTimeout(kctx, ttl*time.Second/6)
			_, err := c.KeepAliveOnce(rctx, lease.ID)
			rcancel()
			if err == nil {
				mu.Lock()
				lastOK = sent
				mu.Unlock()
			}
			select {
			case <-kctx.Done():
			case <-time.After(ttl * time.Second / 3):
			}
		}
	}()
	wch := c.Watch(kctx, key, clientv3.WithFilterPut())
	n := cl.g.Node(leader)
	paused := time.Now()
	if err := n.Pause(ctx); err != nil {
		t.Fatal(err)
	}
	time.Sleep(ttl*time.Second + time.Second) // past the TTL: the lease expired on the paused leader's clock
	if err := n.Resume(ctx); err != nil {
		t.Fatal(err)
	}
	resumed := time.Now()
	deleted := time.Time{}
	timeout := time.After(3 * time.Second)
wait:
	for {
		select {
		case wr, ok := <-wch:
			if !ok || wr.Err() != nil {
				t.Skipf("the watch ended (%v): inconclusive", wr.Err())
			}
			for _, ev := range wr.Events {
				if ev.Type == mvccpb.DELETE {
					deleted = time.Now()
					break wait
				}
			}
		case <-timeout:
			break wait
		}
	}
	if deleted.IsZero() {
		t.Log("the key outlived the old leader's return")
	} else {
		mu.Lock()
		left := lastOK.Add(ttl * time.Second).Sub(deleted)
		mu.Unlock()
		if left > 0 {
			t.Errorf("the key of a lease was deleted %v before the lease could expire (a renewal sent %v earlier succeeded, TTL %ds), %v after the leader (node %d) was paused, %v after it resumed: etcd-io/etcd#15247",
				left.Round(time.Millisecond), (ttl*time.Second - left).Round(time.Millisecond), ttl,
				deleted.Sub(paused).Round(time.Millisecond), leader, deleted.Sub(resumed).Round(time.Millisecond))
		} else {
			t.Logf("the key was deleted %v after the lease could expire (renewals failed meanwhile)", -left)
		}
	}
	kcancel()
	<-done
}
