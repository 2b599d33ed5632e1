package redislock

import (
	"errors"
	"testing"
	"time"

	"github.com/distlock/distlock"
	"github.com/distlock/distlock/sandbox"
)

// TestRWRoundTrips counts, on the wire, what one uncontended read or
// write acquire + release through a Locker costs on a single server: one
// script each (docs/primitives.md quotes it). Deterministic: it counts
// commands.
func TestRWRoundTrips(t *testing.T) {
	const pairs = 5
	ctx := testCtx(t, time.Minute)
	g := sandbox.StartT(t, sandbox.Spec{Kind: sandbox.Redis})
	l, h, _ := countedLocker(t, g.Node(0), nil)
	m, err := l.RWMutex("rw-roundtrips")
	if err != nil {
		t.Fatal(err)
	}
	for _, side := range []struct {
		name string
		lock func() (*distlock.Lease, error)
	}{
		{"read", func() (*distlock.Lease, error) { return m.RLock(ctx) }},
		{"write", func() (*distlock.Lease, error) { return m.Lock(ctx) }},
	} {
		h.twoScriptsEach(t, side.name, pairs, func(int) {
			le, err := side.lock()
			if err != nil {
				t.Fatal(err)
			}
			if err := le.Release(ctx); err != nil {
				t.Fatal(err)
			}
		})
	}
}

// TestRWNotWithWaitReplicas: a driver that waits for replicas offers no
// read-write locks (their grants would not wait), and says so.
func TestRWNotWithWaitReplicas(t *testing.T) {
	g := sandbox.StartT(t, sandbox.Spec{Kind: sandbox.Redis})
	c := nodeClient(g.Node(0))
	defer c.Close()
	d, err := New(c, &Options{WaitReplicas: 1})
	if err != nil {
		t.Fatal(err)
	}
	l := distlock.New(d)
	defer l.Close()
	if _, err := l.RWMutex("k"); !errors.Is(err, distlock.ErrUnsupported) {
		t.Errorf("RWMutex with WaitReplicas: %v, want ErrUnsupported", err)
	}
}

// TestRWLostReplyRetried: a read-write acquire or release whose reply was
// lost and which go-redis sent again has the effect of one delivery: the
// retried acquire counts no second hold, and the retried release reports
// success, not ErrNotHeld.
func TestRWLostReplyRetried(t *testing.T) {
	g := sandbox.StartT(t, sandbox.Spec{Kind: sandbox.Redis})
	ctx := testCtx(t, time.Minute)
	l, drop := retryingLocker(t, g.Node(0), nil, rwAcquireScript, rwReleaseScript, rwRefreshScript)
	other := singleLocker(t, g.Node(0), 10*time.Second)
	m, _ := l.RWMutex("rw-lost")
	om, _ := other.RWMutex("rw-lost")
	for _, write := range []bool{false, true} {
		lock := m.RLock
		if write {
			lock = m.Lock
		}
		before := drop.count()
		drop.arm(rwAcquireScript)
		le, err := lock(ctx)
		if err != nil {
			t.Fatalf("write=%v: acquire with a lost reply: %v", write, err)
		}
		if drop.count() == before {
			t.Fatalf("write=%v: no reply was dropped", write)
		}
		drop.arm(rwReleaseScript)
		if err := le.Release(ctx); err != nil {
			t.Errorf("write=%v: release with a lost reply: %v", write, err)
		}
		w, err := om.TryLock(ctx)
		if err != nil {
			t.Fatalf("write=%v: the lock is not free after the release: %v", write, err)
		}
		_ = w.Release(ctx)
	}
}
