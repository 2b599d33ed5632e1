package zklock

import (
	"errors"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/distlock/distlock"
)

// TestDigestACL: with credentials in the URL, lock nodes are created with
// the creator-only ACL, so a client without them can neither delete a lock
// nor take one; the same user from another session can.
func TestDigestACL(t *testing.T) {
	c := startCluster(t, 1)
	addr := c.g.Addrs()[0]
	open := func(url string) *distlock.Locker {
		t.Helper()
		l, err := distlock.Open(ctxFor(t, 30*time.Second), url)
		if err != nil {
			t.Fatalf("Open: %v", err)
		}
		t.Cleanup(func() { _ = l.Close() })
		return l
	}
	a := open("zk://alice:s3cret@" + addr + "/secure?session_timeout=2s")
	key := uniqueKey(t)
	le, err := a.Acquire(ctxFor(t, 10*time.Second), key)
	if err != nil {
		t.Fatal(err)
	}
	children, _, err := c.admin.Children("/secure/" + encodeKey(key))
	if !errors.Is(err, zk.ErrNoAuth) {
		t.Errorf("unauthenticated Children = %v, %v; want ErrNoAuth", children, err)
	}
	err = c.admin.Delete("/secure/"+encodeKey(key), -1)
	if !errors.Is(err, zk.ErrNoAuth) && !errors.Is(err, zk.ErrNotEmpty) {
		t.Errorf("unauthenticated delete of the key's node = %v, want ErrNoAuth", err)
	}

	anon := open("zk://" + addr + "/secure?session_timeout=2s")
	if _, err := anon.TryAcquire(ctxFor(t, 10*time.Second), key); err == nil || !errors.Is(err, distlock.ErrInvalidConfig) {
		t.Errorf("TryAcquire without credentials = %v, want a permission error (ErrInvalidConfig)", err)
	}
	b := open("zk://alice:s3cret@" + addr + "/secure?session_timeout=2s")
	if _, err := b.TryAcquire(ctxFor(t, 10*time.Second), key); !errors.Is(err, distlock.ErrNotAcquired) {
		t.Errorf("TryAcquire by the same user in another session = %v, want ErrNotAcquired", err)
	}
	if err := le.Release(ctxFor(t, 10*time.Second)); err != nil {
		t.Fatal(err)
	}
	lb, err := b.TryAcquire(ctxFor(t, 10*time.Second), key)
	if err != nil {
		t.Fatalf("same user after release: %v", err)
	}
	_ = lb.Release(ctxFor(t, 10*time.Second))
}
