package redislock

import (
	"bytes"
	"errors"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/distlock/distlock"
	"github.com/distlock/distlock/backend"
	"github.com/distlock/distlock/internal/redisproto"
	"github.com/distlock/distlock/sandbox"
)

// replyDropper loses the reply to chosen requests of a go-redis client
// whose connections go through a sandbox.Proxy: the request reaches Redis
// and runs (the proxy waits for the reply before it drops it), the reply is
// thrown away, and the client sees its connection closed (EOF). A client
// made the way users make them (go-redis's default MaxRetries: 3) then
// sends the same request again.
type replyDropper struct{ p *sandbox.Proxy }

// arm drops the reply to the next request that runs one of scripts.
func (r replyDropper) arm(scripts ...*redis.Script) {
	var markers [][]byte
	for _, s := range scripts {
		markers = append(markers, []byte(s.Hash()))
	}
	r.p.DropReply(func(chunk []byte) bool {
		for _, m := range markers {
			if bytes.Contains(chunk, m) {
				return true
			}
		}
		return false
	}, nil)
}

func (r replyDropper) count() int { return r.p.Dropped() }

// retryingClient is a client of n with go-redis's default retries, through
// a proxy whose replies the returned dropper may drop. The scripts are
// loaded first, so that the dropped request is the one that runs the
// script (not a NOSCRIPT probe).
func retryingClient(t *testing.T, n sandbox.Node) (*redis.Client, replyDropper) {
	t.Helper()
	p := sandbox.StartProxyT(t, n.Addr)
	c := redis.NewClient(&redis.Options{Addr: p.Addr()})
	t.Cleanup(func() { c.Close() })
	ctx := testCtx(t, 10*time.Second)
	for _, s := range []*redis.Script{redisproto.AcquireScript, redisproto.WaitScript, redisproto.ReleaseScript, redisproto.RefreshScript, redisproto.FenceScript} {
		if err := s.Load(ctx, c).Err(); err != nil {
			t.Fatal(err)
		}
	}
	return c, replyDropper{p}
}

// retryingLocker returns a Locker (default TTL 10 s, closed when t ends)
// over a driver with opts on a retryingClient of n, on which scripts are
// loaded too, and the client's dropper.
func retryingLocker(t *testing.T, n sandbox.Node, opts *Options, scripts ...*redis.Script) (*distlock.Locker, replyDropper) {
	t.Helper()
	c, drop := retryingClient(t, n)
	ctx := testCtx(t, 10*time.Second)
	for _, s := range scripts {
		if err := s.Load(ctx, c).Err(); err != nil {
			t.Fatal(err)
		}
	}
	d, err := New(c, opts)
	if err != nil {
		t.Fatal(err)
	}
	l := distlock.New(d, distlock.WithDefaultTTL(10*time.Second))
	t.Cleanup(func() { l.Close() })
	return l, drop
}

// TestLostReplyRetried: a lost reply retried by the client has the effect
// of one delivery. A retried acquisition must not count a second hold (the
// lock would stay held by nobody after Release), a retried release must not
// report ErrNotHeld for a release that happened, nor lower a hold count
// twice (freeing another process's hold of the same owner).
func TestLostReplyRetried(t *testing.T) {
	g := sandbox.StartT(t, sandbox.Spec{Kind: sandbox.Redis})
	for _, mode := range []WaitMode{WaitQueue, WaitNotify} {
		t.Run(mode.String(), func(t *testing.T) {
			ctx := testCtx(t, time.Minute)
			c, drop := retryingClient(t, g.Node(0))
			d, err := New(c, &Options{Wait: mode})
			if err != nil {
				t.Fatal(err)
			}
			l := distlock.New(d, distlock.WithDefaultTTL(10*time.Second))
			t.Cleanup(func() { l.Close() })
			other := singleLocker(t, g.Node(0), 10*time.Second)
			peer := singleLocker(t, g.Node(0), 10*time.Second)
			free := func(key string) bool {
				t.Helper()
				le, err := other.TryAcquire(ctx, key)
				if err != nil {
					if !errors.Is(err, distlock.ErrNotAcquired) {
						t.Fatal(err)
					}
					return false
				}
				_ = le.Release(ctx)
				return true
			}

			t.Run("acquire", func(t *testing.T) {
				key := "lost-acquire-" + mode.String()
				drop.arm(redisproto.AcquireScript, redisproto.WaitScript)
				le, err := l.TryAcquire(ctx, key)
				if err != nil {
					t.Fatalf("TryAcquire with its reply lost once: %v", err)
				}
				if drop.count() == 0 {
					t.Fatal("no reply was dropped")
				}
				if err := le.Release(ctx); err != nil {
					t.Fatal(err)
				}
				if !free(key) {
					t.Error("after the only lease was released the lock is still held: the retried acquisition counted a second hold")
				}
			})

			t.Run("release", func(t *testing.T) {
				key := "lost-release-" + mode.String()
				le, err := l.TryAcquire(ctx, key)
				if err != nil {
					t.Fatal(err)
				}
				before := drop.count()
				drop.arm(redisproto.ReleaseScript)
				if err := le.Release(ctx); err != nil {
					t.Errorf("Release with its reply lost once: %v", err)
				}
				if drop.count() == before {
					t.Fatal("no reply was dropped")
				}
				if !free(key) {
					t.Error("the lock is still held after Release")
				}
			})

			t.Run("release-shared", func(t *testing.T) {
				key := "lost-release-shared-" + mode.String()
				owner := "shared-owner-0123456789abcdef-" + mode.String()
				la, err := peer.Acquire(ctx, key, distlock.WithOwner(owner))
				if err != nil {
					t.Fatal(err)
				}
				lb, err := l.TryAcquire(ctx, key, distlock.WithOwner(owner))
				if err != nil {
					t.Fatal(err)
				}
				drop.arm(redisproto.ReleaseScript)
				_ = lb.Release(ctx)
				if free(key) {
					t.Fatal("a retried release freed the other process's hold of the same owner")
				}
				if la.Err() != nil {
					t.Fatal(la.Err())
				}
				if err := la.Release(ctx); err != nil {
					t.Fatal(err)
				}
				if !free(key) {
					t.Error("the lock is still held after both holds were released")
				}
			})
		})
	}
}

// TestLongTTLKept: the longest TTL the driver accepts reaches Redis exactly
// (no millisecond count that overflows into a 1 ms expiry).
func TestLongTTLKept(t *testing.T) {
	g := sandbox.StartT(t, sandbox.Spec{Kind: sandbox.Redis})
	ctx := testCtx(t, 30*time.Second)
	c := nodeClient(g.Node(0))
	t.Cleanup(func() { c.Close() })
	l := singleLocker(t, g.Node(0), time.Second)
	le, err := l.TryAcquire(ctx, "long", distlock.WithTTL(MaxTTL), distlock.WithoutAutoRenew())
	if err != nil {
		t.Fatal(err)
	}
	defer le.Release(ctx)
	if pttl := c.PTTL(ctx, redisproto.KeysFor(DefaultPrefix, "long").Lock).Val(); pttl < MaxTTL-time.Minute {
		t.Errorf("Redis keeps a lock asked for %v for %v", MaxTTL, pttl)
	}
	if got := redisproto.Millis(1<<63 - 1); got <= 0 {
		t.Errorf("Millis of the largest duration = %d", got)
	}
}

// TestReleasedMemory: a freed lock leaves no hash (the queue-mode acquire
// checks "no lock, no queue" with one EXISTS) and remembers the hold that
// freed it in …:last, so a late delivery of that release succeeds, also
// after another owner took the lock, without touching the new holder's
// lock. A hash left by an earlier version's release (only the field r)
// counts as free, and its r is still honoured.
func TestReleasedMemory(t *testing.T) {
	g := sandbox.StartT(t, sandbox.Spec{Kind: sandbox.Redis})
	ctx := testCtx(t, 30*time.Second)
	c := nodeClient(g.Node(0))
	t.Cleanup(func() { c.Close() })
	for _, mode := range []WaitMode{WaitQueue, WaitNotify} {
		t.Run(mode.String(), func(t *testing.T) {
			d, err := New(c, &Options{Wait: mode})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { d.Close() })
			key := "memory-" + mode.String()
			ks := d.keys(key)
			req := func(owner string) backend.Request {
				return backend.Request{Key: key, Owner: owner, TTL: 10 * time.Second}
			}
			g1, err := d.TryAcquire(ctx, req("first"))
			if err != nil {
				t.Fatal(err)
			}
			h1 := g1.Lock.(*lock).hold
			if err := g1.Lock.Release(ctx); err != nil {
				t.Fatal(err)
			}
			if n := c.Exists(ctx, ks.Lock).Val(); n != 0 {
				t.Errorf("a freed lock left its hash (%v)", c.HGetAll(ctx, ks.Lock).Val())
			}
			if v, pttl := c.Get(ctx, ks.Last).Val(), c.PTTL(ctx, ks.Last).Val(); v != h1 || pttl <= 0 || pttl > redisproto.ReleasedMemory {
				t.Errorf("%s = %q with PTTL %v, want the released hold %q for at most %v", ks.Last, v, pttl, h1, redisproto.ReleasedMemory)
			}
			if n, err := redisproto.ReleaseHold(ctx, c, ks, "first", h1, "release"); err != nil || n != 0 {
				t.Errorf("a repeated delivery of the release on the free lock: %d, %v; want 0", n, err)
			}
			g2, err := d.TryAcquire(ctx, req("second"))
			if err != nil {
				t.Fatal(err)
			}
			if n, err := redisproto.ReleaseHold(ctx, c, ks, "first", h1, "release"); err != nil || n != 0 {
				t.Errorf("a repeated delivery of the release after another owner took the lock: %d, %v; want 0", n, err)
			}
			if o := c.HGet(ctx, ks.Lock, "o").Val(); o != "second" {
				t.Fatalf("the late release touched the new holder's lock: owner %q", o)
			}
			if err := g2.Lock.Release(ctx); err != nil {
				t.Fatal(err)
			}

			// An earlier version's memory: a hash holding only r.
			if err := c.HSet(ctx, ks.Lock, "r", "0123456789abcdef").Err(); err != nil {
				t.Fatal(err)
			}
			if err := c.PExpire(ctx, ks.Lock, redisproto.ReleasedMemory).Err(); err != nil {
				t.Fatal(err)
			}
			g3, err := d.TryAcquire(ctx, req("third"))
			if err != nil {
				t.Fatalf("a lock whose hash holds only an earlier version's r: %v", err)
			}
			if n, err := redisproto.ReleaseHold(ctx, c, ks, "old", "0123456789abcdef", "release"); err != nil || n != 0 {
				t.Errorf("a repeated delivery of an earlier version's release: %d, %v; want 0", n, err)
			}
			if err := g3.Lock.Release(ctx); err != nil {
				t.Fatal(err)
			}
		})
	}
}

// TestLostReplyRetriedPermits: the semaphore's scripts under a lost reply
// the client retries. A retried acquisition is answered with its grant
// (counted once); a retried release must not report ErrNotHeld for a
// release that happened, and must not free another grant's permits.
func TestLostReplyRetriedPermits(t *testing.T) {
	g := sandbox.StartT(t, sandbox.Spec{Kind: sandbox.Redis})
	ctx := testCtx(t, time.Minute)
	l, drop := retryingLocker(t, g.Node(0), nil, semAcquireScript, semReleaseScript, semRefreshScript)
	s, err := l.Semaphore("lost-permits", 2)
	if err != nil {
		t.Fatal(err)
	}
	other := singleLocker(t, g.Node(0), 10*time.Second)
	os, err := other.Semaphore("lost-permits", 2)
	if err != nil {
		t.Fatal(err)
	}

	drop.arm(semAcquireScript)
	a, err := s.TryAcquire(ctx)
	if err != nil {
		t.Fatalf("TryAcquire with its reply lost once: %v", err)
	}
	if drop.count() == 0 {
		t.Fatal("no reply was dropped")
	}
	b, err := os.TryAcquire(ctx)
	if err != nil {
		t.Fatalf("the second permit (the retried acquisition counted twice?): %v", err)
	}
	before := drop.count()
	drop.arm(semReleaseScript)
	if err := a.Release(ctx); err != nil {
		t.Errorf("Release with its reply lost once: %v", err)
	}
	if drop.count() == before {
		t.Fatal("no reply was dropped")
	}
	if b.Err() != nil {
		t.Fatalf("the other grant: %v", b.Err())
	}
	// One permit is free again, one is b's.
	c2, err := os.TryAcquire(ctx)
	if err != nil {
		t.Fatalf("after the release one permit should be free: %v", err)
	}
	if _, err := os.TryAcquire(ctx); !errors.Is(err, distlock.ErrNotAcquired) {
		t.Errorf("a third permit of two: %v, want ErrNotAcquired", err)
	}
	for _, le := range []*distlock.Lease{b, c2} {
		if err := le.Release(ctx); err != nil {
			t.Error(err)
		}
	}
}

// TestLostReplyRetriedReadRelease: readers release at once. Reader a's
// release runs, its reply is lost, reader b releases before a's client
// sends the release again: the retry must still succeed (the hold was
// released), not report ErrNotHeld because b's release came in between.
func TestLostReplyRetriedReadRelease(t *testing.T) {
	g := sandbox.StartT(t, sandbox.Spec{Kind: sandbox.Redis})
	ctx := testCtx(t, time.Minute)
	l, drop := retryingLocker(t, g.Node(0), nil, rwAcquireScript, rwReleaseScript, rwRefreshScript)
	other := singleLocker(t, g.Node(0), 10*time.Second)
	const key = "lost-read-release"
	ma, err := l.RWMutex(key)
	if err != nil {
		t.Fatal(err)
	}
	mb, err := other.RWMutex(key)
	if err != nil {
		t.Fatal(err)
	}
	a, err := ma.TryRLock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	b, err := mb.TryRLock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	marker := []byte(rwReleaseScript.Hash())
	bReleased := make(chan error, 1)
	drop.p.DropReply(func(chunk []byte) bool { return bytes.Contains(chunk, marker) },
		func(_, _ []byte) bool {
			// a's release ran and its reply is here (to be lost): b
			// releases now, before a's client retries.
			select {
			case bReleased <- b.Release(ctx):
			default:
			}
			return true
		})
	if err := a.Release(ctx); err != nil {
		t.Errorf("a reader's Release with its reply lost once, another reader released in between: %v", err)
	}
	if drop.count() == 0 {
		t.Fatal("no reply was dropped")
	}
	select {
	case err := <-bReleased:
		if err != nil {
			t.Fatalf("b's release: %v", err)
		}
	default:
		t.Fatal("b did not release in between")
	}
	w, err := mb.TryLock(ctx)
	if err != nil {
		t.Fatalf("both readers released, the write side should be free: %v", err)
	}
	_ = w.Release(ctx)
}
