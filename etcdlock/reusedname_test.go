//go:build linux

package etcdlock

import (
	"context"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/distlock/distlock/backend"
	"github.com/distlock/distlock/sandbox"
)

// TestReusedNameOldDeletion: a waiter follows the key ahead of it through
// a watch of that key's NAME that stays open across waits, and names are
// reused, so the watch's history holds the deletion of an earlier key of
// the same name. Waiting behind the current key of that name, the waiter
// must not take that old deletion (its revision precedes the read that
// showed the current key) for the release of the current holder.
func TestReusedNameOldDeletion(t *testing.T) {
	g := sandbox.StartT(t, sandbox.Spec{Kind: sandbox.Etcd})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	ds := ownDrivers(t, g.Addrs(), 2, "reused")
	a, b := ds[0], ds[1]
	req := backend.Request{Key: "k", Owner: "o", TTL: 10 * time.Second}
	type result struct {
		g   backend.Grant
		err error
	}
	wait := func(d *Driver) chan result {
		ch := make(chan result, 1)
		go func() {
			g, err := d.Wait(ctx, req)
			ch <- result{g, err}
		}()
		return ch
	}
	queued := func(n int64) {
		t.Helper()
		for range 200 {
			resp, err := a.c.Get(ctx, lockRange(a.prefix, "k"), clientv3.WithPrefix(), clientv3.WithCountOnly())
			if err != nil {
				t.Fatal(err)
			}
			if resp.Count == n {
				return
			}
			time.Sleep(10 * time.Millisecond)
		}
		t.Fatalf("the queue never had %d keys", n)
	}
	got := func(ch chan result) backend.Grant {
		t.Helper()
		select {
		case r := <-ch:
			if r.err != nil {
				t.Fatal(r.err)
			}
			return r.g
		case <-time.After(10 * time.Second):
			t.Fatal("no grant")
		}
		return backend.Grant{}
	}
	// A holds (its name N), B waits behind N and gets it on N's release:
	// B's watch of N now has N's deletion in its history.
	ga1 := got(wait(a))
	nameA := ga1.Lock.(*lock).ekey
	chB := wait(b)
	queued(2)
	if err := ga1.Lock.Release(ctx); err != nil {
		t.Fatal(err)
	}
	gb1 := got(chB)
	// A waits behind B under the same name N, and holds once B releases.
	chA := wait(a)
	queued(2)
	if err := gb1.Lock.Release(ctx); err != nil {
		t.Fatal(err)
	}
	ga2 := got(chA)
	if name := ga2.Lock.(*lock).ekey; name != nameA {
		t.Fatalf("A's second key is %s, not its first name %s: the name was not reused", name, nameA)
	}
	b.mu.Lock()
	_, open := b.watches[nameA]
	b.mu.Unlock()
	if !open {
		t.Fatalf("B's watch of %s closed already: the test needs it open", nameA)
	}
	// B waits behind the new key of name N: the old deletion must not
	// grant it while A holds.
	chB = wait(b)
	select {
	case r := <-chB:
		t.Fatalf("B was granted (token %d, err %v) while A held the lock (token %d) under the reused name %s", r.g.Token, r.err, ga2.Token, nameA)
	case <-time.After(500 * time.Millisecond):
	}
	if err := ga2.Lock.Release(ctx); err != nil {
		t.Fatal(err)
	}
	if err := got(chB).Lock.Release(ctx); err != nil {
		t.Fatal(err)
	}
}
