package redislock

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/distlock/distlock/backend"
	"github.com/distlock/distlock/sandbox"
)

// queueDriver starts a Redis server and returns a client of it and a
// queue-mode driver over that client, both closed when t ends.
func queueDriver(t *testing.T) (*redis.Client, *Driver) {
	t.Helper()
	g := sandbox.StartT(t, sandbox.Spec{Kind: sandbox.Redis})
	c := nodeClient(g.Node(0))
	t.Cleanup(func() { c.Close() })
	d, err := New(c, &Options{Wait: WaitQueue})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { d.Close() })
	return c, d
}

// TestFairHandOffProtocol drives the fair-mode scripts step by step: a
// release hands the lock to the oldest live waiter, who holds it at once
// (n=1) with a message that carries its token; a waiter that missed the
// message confirms the hand-off without counting a second hold; a waiter
// that gives up passes the lock on; a dead waiter is skipped.
func TestFairHandOffProtocol(t *testing.T) {
	c, d := queueDriver(t)
	ctx := testCtx(t, 30*time.Second)
	const ttl, window = 10 * time.Second, 3 * time.Second

	// Hand-offs go to the driver's inbox, "released" to the key's channel.
	ps := c.Subscribe(ctx, d.inbox)
	defer ps.Close()
	hold := func(key, owner string) acquireResult {
		t.Helper()
		r, err := d.fairAttempt(ctx, d.keys(key), owner, ttl, false, 0, "", 0)
		if err != nil || !r.held {
			t.Fatalf("%s takes %q: %+v, %v", owner, key, r, err)
		}
		return r
	}
	enqueue := func(key, owner, wait string, attempt int, win time.Duration) {
		t.Helper()
		r, err := d.fairAttempt(ctx, d.keys(key), owner, ttl, true, win, wait, attempt)
		if err != nil || r.held {
			t.Fatalf("%s queues for %q: %+v, %v", owner, key, r, err)
		}
	}
	release := func(key, owner string) int64 {
		t.Helper()
		ks := d.keys(key)
		n, err := releaseScript.Run(ctx, c, ks.releaseKeys(), owner, ks.channel, "release").Int64()
		if err != nil {
			t.Fatal(err)
		}
		return n
	}
	lockHash := func(key string) (map[string]string, time.Duration) {
		t.Helper()
		ks := d.keys(key)
		h, err := c.HGetAll(ctx, ks.lock).Result()
		if err != nil {
			t.Fatal(err)
		}
		return h, c.PTTL(ctx, ks.lock).Val()
	}
	message := func(want string) {
		t.Helper()
		for {
			m, err := ps.ReceiveMessage(ctx)
			if err != nil {
				t.Fatalf("waiting for %q: %v", want, err)
			}
			if m.Payload == want {
				return
			}
		}
	}

	t.Run("hand-off is the grant", func(t *testing.T) {
		key := "handoff"
		if err := ps.Subscribe(ctx, d.keys(key).channel); err != nil {
			t.Fatal(err)
		}
		h0 := hold(key, "holder")
		enqueue(key, "waiter", "w1", 7, window)
		if n := release(key, "holder"); n != 0 {
			t.Fatalf("release: %d", n)
		}
		want := h0.token + 1
		message(fmt.Sprintf("h:w1:7:%d", want))
		h, pttl := lockHash(key)
		if h["o"] != "waiter" || h["n"] != "1" || h["h"] != "w1" || h["t"] != fmt.Sprint(want) {
			t.Fatalf("after hand-off: %v", h)
		}
		if pttl <= 0 || pttl > window {
			t.Fatalf("handed lock lives %v, want at most the waiter's window %v", pttl, window)
		}
		// The waiter missed the message: its next attempt confirms the
		// hand-off, extends it to the full TTL, and counts no second hold.
		r, err := d.fairAttempt(ctx, d.keys(key), "waiter", ttl, true, window, "w1", 8)
		if err != nil || !r.held || r.token != want || r.pttl < ttl-time.Second {
			t.Fatalf("confirm: %+v, %v", r, err)
		}
		h, _ = lockHash(key)
		if h["n"] != "1" || h["h"] != "" {
			t.Fatalf("after confirm: %v", h)
		}
		if n := release(key, "waiter"); n != 0 {
			t.Fatalf("one release must free the confirmed hand-off, count left %d", n)
		}
		message("released") // on the key's channel
	})

	t.Run("abandoned hand-off passes on", func(t *testing.T) {
		key := "abandon"
		if err := ps.Subscribe(ctx, d.keys(key).channel); err != nil {
			t.Fatal(err)
		}
		h0 := hold(key, "holder")
		enqueue(key, "first", "wa", 0, window)
		enqueue(key, "second", "wb", 3, window)
		release(key, "holder")
		message(fmt.Sprintf("h:wa:0:%d", h0.token+1))
		// "first" gave up before it saw the message.
		if err := d.abandon(ctx, d.keys(key), "first", "wa"); err != nil {
			t.Fatal(err)
		}
		message(fmt.Sprintf("h:wb:3:%d", h0.token+2))
		h, _ := lockHash(key)
		if h["o"] != "second" || h["h"] != "wb" {
			t.Fatalf("after abandon: %v", h)
		}
		// Abandoning with another wait's name gives back nothing.
		if err := d.abandon(ctx, d.keys(key), "second", "wa"); err != nil {
			t.Fatal(err)
		}
		if h, _ := lockHash(key); h["o"] != "second" {
			t.Fatalf("a stale abandon freed the lock: %v", h)
		}
		release(key, "second")
	})

	t.Run("re-entry by the same owner elsewhere survives an abandon", func(t *testing.T) {
		key := "reentry"
		hold(key, "holder")
		enqueue(key, "shared", "wc", 0, window)
		release(key, "holder")
		// Another process of owner "shared" re-enters the handed lock.
		hold(key, "shared")
		if h, _ := lockHash(key); h["n"] != "2" {
			t.Fatalf("re-entry: %v", h)
		}
		if err := d.abandon(ctx, d.keys(key), "shared", "wc"); err != nil {
			t.Fatal(err)
		}
		h, _ := lockHash(key)
		if h["o"] != "shared" || h["n"] != "1" {
			t.Fatalf("the abandon must give back only the handed hold: %v", h)
		}
		release(key, "shared")
	})

	t.Run("dead waiter is skipped", func(t *testing.T) {
		key := "dead"
		if err := ps.Subscribe(ctx, d.keys(key).channel); err != nil {
			t.Fatal(err)
		}
		h0 := hold(key, "holder")
		enqueue(key, "dead", "wd", 0, 50*time.Millisecond) // stops heartbeating
		enqueue(key, "live", "wl", 0, window)
		time.Sleep(100 * time.Millisecond)
		release(key, "holder")
		message(fmt.Sprintf("h:wl:0:%d", h0.token+1))
		release(key, "live")
	})
}

// TestFairWaitGrantsByMessage checks that a waiter served by a hand-off
// gets the lock without confirming it (the message is the grant), that the
// grant's validity is no longer than the handed lock's life, and that the
// first renewal extends it.
func TestFairWaitGrantsByMessage(t *testing.T) {
	c, d := queueDriver(t)
	ctx := testCtx(t, 30*time.Second)
	const ttl = 30 * time.Second
	window := 3 * heartbeat(ttl)
	key := "by-message"
	held, err := d.TryAcquire(ctx, backend.Request{Key: key, Owner: "holder", TTL: ttl})
	if err != nil {
		t.Fatal(err)
	}
	type result struct {
		g    backend.Grant
		err  error
		done time.Time
	}
	got := make(chan result, 1)
	asked := time.Now()
	go func() {
		g, err := d.Wait(ctx, backend.Request{Key: key, Owner: "waiter", TTL: ttl})
		got <- result{g, err, time.Now()}
	}()
	// Release once the waiter is queued.
	for deadline := time.Now().Add(5 * time.Second); ; {
		if n, _ := c.ZCard(ctx, d.keys(key).queue).Result(); n == 1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the waiter never queued")
		}
		time.Sleep(5 * time.Millisecond)
	}
	if err := held.Lock.Release(ctx); err != nil {
		t.Fatal(err)
	}
	r := <-got
	if r.err != nil {
		t.Fatal(r.err)
	}
	defer r.g.Lock.Release(context.Background())
	if r.g.Token != held.Token+1 {
		t.Errorf("token %d, want %d", r.g.Token, held.Token+1)
	}
	// Granted by the message: the hand-off was not confirmed by a script.
	if h := c.HGet(ctx, d.keys(key).lock, "h").Val(); h == "" {
		t.Errorf("the waiter confirmed the hand-off with a round trip instead of taking the message as the grant")
	}
	// Its validity ends no later than the handed lock's life allows: the
	// grant states that life, from a moment before the hand-off.
	if r.g.TTL != window || r.g.ValidFrom.Before(asked) || r.g.ValidFrom.After(r.done) {
		t.Errorf("grant: TTL %v from %v after asking; want the handed life %v from a moment within the wait (%v)",
			r.g.TTL, r.g.ValidFrom.Sub(asked), window, r.done.Sub(asked))
	}
	if pttl := c.PTTL(ctx, d.keys(key).lock).Val(); pttl > window {
		t.Errorf("handed lock lives %v, more than the window %v", pttl, window)
	}
	if err := r.g.Lock.Refresh(ctx, ttl); err != nil {
		t.Fatal(err)
	}
	if pttl := c.PTTL(ctx, d.keys(key).lock).Val(); pttl < ttl-time.Second {
		t.Errorf("after a refresh the lock lives %v, want about %v", pttl, ttl)
	}
}
