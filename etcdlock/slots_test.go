package etcdlock_test

import (
	"slices"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/distlock/distlock"
)

// TestNameSlots: a driver names each acquisition's key after its lease and
// the lowest free name slot, so one lock taken again and again reuses one
// name (deleted keys stay in etcd's index until compaction, and every read
// of the queue visits them); acquisitions in progress at once get distinct
// names, and a name is reused only after its key is gone.
func TestNameSlots(t *testing.T) {
	c := startCluster(t, 1)
	l, d := locker(t, c.g.Addrs()...)
	key := "slots"
	names := func() []string {
		t.Helper()
		resp, err := d.Client().Get(ctxT(t, 5*time.Second), d.KeyRange(key), clientv3.WithPrefix(), clientv3.WithKeysOnly(),
			clientv3.WithSort(clientv3.SortByCreateRevision, clientv3.SortAscend))
		if err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, kv := range resp.Kvs {
			out = append(out, string(kv.Key))
		}
		return out
	}

	var first string
	for i := range 5 {
		le, err := l.Acquire(ctxT(t, 10*time.Second), key, distlock.WithOwner("a"))
		if err != nil {
			t.Fatal(err)
		}
		got := names()
		if len(got) != 1 {
			t.Fatalf("acquisition %d: the range holds %v, want one key", i, got)
		}
		if i == 0 {
			first = got[0]
		} else if got[0] != first {
			t.Errorf("acquisition %d is named %s, not %s: names of released locks are not reused", i, got[0], first)
		}
		if err := le.Release(ctxT(t, 10*time.Second)); err != nil {
			t.Fatal(err)
		}
	}

	// Held by one owner, awaited by another in the same driver: two names.
	held, err := l.Acquire(ctxT(t, 10*time.Second), key, distlock.WithOwner("a"))
	if err != nil {
		t.Fatal(err)
	}
	got := make(chan *distlock.Lease, 1)
	go func() {
		le, err := l.Acquire(ctxT(t, 10*time.Second), key, distlock.WithOwner("b"))
		if err != nil {
			t.Error(err)
		}
		got <- le
	}()
	queued(t, d, key, 2)
	both := names()
	if len(both) != 2 || both[0] != first || both[1] == first {
		t.Fatalf("held and awaited at once: keys %v, want %s and another name", both, first)
	}
	if err := held.Release(ctxT(t, 10*time.Second)); err != nil {
		t.Fatal(err)
	}
	second := <-got
	if second == nil {
		t.FailNow()
	}
	if err := second.Release(ctxT(t, 10*time.Second)); err != nil {
		t.Fatal(err)
	}
	le, err := l.Acquire(ctxT(t, 10*time.Second), key, distlock.WithOwner("c"))
	if err != nil {
		t.Fatal(err)
	}
	if now := names(); !slices.Equal(now, []string{first}) {
		t.Errorf("after both released, the next acquisition has keys %v, want [%s]", now, first)
	}
	_ = le.Release(ctxT(t, 10*time.Second))
}
