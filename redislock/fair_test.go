package redislock

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/distlock/distlock/backend"
	"github.com/distlock/distlock/internal/redisproto"
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
// release hands the lock to the oldest live waiter, recording it held by
// the waiter's wait (n=1) and waking it with a message that grants
// nothing; the waiter's next attempt confirms the hand-off without
// counting a second hold; a waiter that gives up passes the lock on; a
// dead waiter is skipped.
func TestFairHandOffProtocol(t *testing.T) {
	c, d := queueDriver(t)
	ctx := testCtx(t, 30*time.Second)
	const ttl, window = 10 * time.Second, 3 * time.Second

	// Hand-offs go to the driver's inbox, "released" to the key's channel.
	ps := c.Subscribe(ctx, d.inbox)
	defer ps.Close()
	// subscribe adds key's channel to ps, failing t (the subtest) if it
	// cannot.
	subscribe := func(t *testing.T, key string) {
		t.Helper()
		if err := ps.Subscribe(ctx, d.keys(key).Channel); err != nil {
			t.Fatal(err)
		}
	}
	hold := func(key, owner, id string) redisproto.AcquireResult {
		t.Helper()
		r, err := d.fairAttempt(ctx, d.keys(key), owner, ttl, false, 0, id, 0)
		if err != nil || !r.Held {
			t.Fatalf("%s takes %q: %+v, %v", owner, key, r, err)
		}
		return r
	}
	enqueue := func(key, owner, wait string, attempt int, win time.Duration) {
		t.Helper()
		r, err := d.fairAttempt(ctx, d.keys(key), owner, ttl, true, win, wait, attempt)
		if err != nil || r.Held {
			t.Fatalf("%s queues for %q: %+v, %v", owner, key, r, err)
		}
	}
	release := func(key, owner, id string) int64 {
		t.Helper()
		n, err := redisproto.ReleaseHold(ctx, c, d.keys(key), owner, id, "release")
		if err != nil {
			t.Fatal(err)
		}
		return n
	}
	lockHash := func(key string) (map[string]string, time.Duration) {
		t.Helper()
		ks := d.keys(key)
		h, err := c.HGetAll(ctx, ks.Lock).Result()
		if err != nil {
			t.Fatal(err)
		}
		return h, c.PTTL(ctx, ks.Lock).Val()
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

	t.Run("hand-off is recorded, then confirmed", func(t *testing.T) {
		key := "handoff"
		subscribe(t, key)
		h0 := hold(key, "holder", "h0")
		enqueue(key, "waiter", "w1", 7, window)
		if n := release(key, "holder", "h0"); n != 0 {
			t.Fatalf("release: %d", n)
		}
		want := h0.Token + 1
		message("h:w1")
		h, pttl := lockHash(key)
		if h["o"] != "waiter" || h["n"] != "1" || h["a:w1"] != "1" || h["t"] != fmt.Sprint(want) {
			t.Fatalf("after hand-off: %v", h)
		}
		if pttl <= 0 || pttl > window {
			t.Fatalf("handed lock lives %v, want at most the waiter's window %v", pttl, window)
		}
		// The waiter's next attempt confirms the hand-off, extends it to
		// the full TTL, and counts no second hold.
		r, err := d.fairAttempt(ctx, d.keys(key), "waiter", ttl, true, window, "w1", 8)
		if err != nil || !r.Held || r.Token != want || r.PTTL < ttl-time.Second {
			t.Fatalf("confirm: %+v, %v", r, err)
		}
		if h, _ = lockHash(key); h["n"] != "1" {
			t.Fatalf("after confirm: %v", h)
		}
		if n := release(key, "waiter", "w1"); n != 0 {
			t.Fatalf("one release must free the confirmed hand-off, count left %d", n)
		}
		message("released") // on the key's channel
		// A second delivery of that release (a retry) succeeds and frees
		// nothing more; an unknown hold's release fails.
		if n := release(key, "waiter", "w1"); n != 0 {
			t.Errorf("a retried release: %d, want 0", n)
		}
		if n := release(key, "waiter", "w2"); n != -1 {
			t.Errorf("the release of a hold never taken: %d, want -1", n)
		}
	})

	t.Run("abandoned hand-off passes on", func(t *testing.T) {
		key := "abandon"
		subscribe(t, key)
		h0 := hold(key, "holder", "h0")
		enqueue(key, "first", "wa", 0, window)
		enqueue(key, "second", "wb", 3, window)
		release(key, "holder", "h0")
		message("h:wa")
		// "first" gave up before it confirmed.
		if err := d.abandon(ctx, d.keys(key), "first", "wa"); err != nil {
			t.Fatal(err)
		}
		message("h:wb")
		h, _ := lockHash(key)
		if h["o"] != "second" || h["a:wb"] != "1" || h["t"] != fmt.Sprint(h0.Token+2) {
			t.Fatalf("after abandon: %v", h)
		}
		// Abandoning with another wait's name gives back nothing.
		if err := d.abandon(ctx, d.keys(key), "second", "wa"); err != nil {
			t.Fatal(err)
		}
		if h, _ := lockHash(key); h["o"] != "second" {
			t.Fatalf("a stale abandon freed the lock: %v", h)
		}
		release(key, "second", "wb")
	})

	t.Run("re-entry by the same owner elsewhere survives an abandon", func(t *testing.T) {
		key := "reentry"
		hold(key, "holder", "h0")
		enqueue(key, "shared", "wc", 0, window)
		release(key, "holder", "h0")
		// Another process of owner "shared" re-enters the handed lock.
		hold(key, "shared", "x1")
		if h, _ := lockHash(key); h["n"] != "2" {
			t.Fatalf("re-entry: %v", h)
		}
		if err := d.abandon(ctx, d.keys(key), "shared", "wc"); err != nil {
			t.Fatal(err)
		}
		h, _ := lockHash(key)
		if h["o"] != "shared" || h["n"] != "1" || h["a:x1"] != "1" {
			t.Fatalf("the abandon must give back only the handed hold: %v", h)
		}
		release(key, "shared", "x1")
	})

	t.Run("dead waiter is skipped", func(t *testing.T) {
		key := "dead"
		subscribe(t, key)
		hold(key, "holder", "h0")
		enqueue(key, "dead", "wd", 0, 50*time.Millisecond) // stops heartbeating
		enqueue(key, "live", "wl", 0, window)
		time.Sleep(100 * time.Millisecond)
		release(key, "holder", "h0")
		message("h:wl")
		release(key, "live", "wl")
	})

	// A lock that expired (here: deleted) while a waiter is queued is free
	// with a queue: an attempt of another owner must not take it ahead of
	// the waiter (the uncontended fast path is for a free lock with no
	// queue at all), and the waiter's own next attempt takes it.
	t.Run("free lock with a live waiter is the waiter's", func(t *testing.T) {
		key := "expired-with-waiter"
		hold(key, "holder", "h0")
		enqueue(key, "waiter", "w1", 0, window)
		if err := c.Del(ctx, d.keys(key).Lock).Err(); err != nil {
			t.Fatal(err)
		}
		if r, err := d.fairAttempt(ctx, d.keys(key), "other", ttl, false, 0, "o1", 0); err != nil || r.Held {
			t.Fatalf("another owner's attempt took a lock a waiter is queued for: %+v, %v", r, err)
		}
		r, err := d.fairAttempt(ctx, d.keys(key), "waiter", ttl, true, window, "w1", 1)
		if err != nil || !r.Held {
			t.Fatalf("the queued waiter's attempt: %+v, %v", r, err)
		}
		if n, _ := c.Exists(ctx, d.keys(key).Queue, d.keys(key).Alive).Result(); n != 0 {
			t.Fatalf("the waiter that took the lock is still queued (%d keys left)", n)
		}
		release(key, "waiter", "w1")
	})

	// A free lock whose queue holds only dead entries goes to the first
	// attempt, which drops them.
	t.Run("free lock with only dead waiters is taken", func(t *testing.T) {
		key := "expired-dead-waiter"
		hold(key, "holder", "h0")
		enqueue(key, "dead", "wd", 0, 50*time.Millisecond)
		if err := c.Del(ctx, d.keys(key).Lock).Err(); err != nil {
			t.Fatal(err)
		}
		time.Sleep(100 * time.Millisecond)
		r := hold(key, "other", "o1")
		if r.Token == 0 {
			t.Fatalf("no token: %+v", r)
		}
		if n, _ := c.Exists(ctx, d.keys(key).Queue, d.keys(key).Alive).Result(); n != 0 {
			t.Fatalf("dead entries left in the queue (%d keys)", n)
		}
		release(key, "other", "o1")
	})
}

// TestFairWaitConfirmsHandOff checks that a waiter served by a hand-off
// reports the lock only after its own attempt read it from the lock's
// state, with the next token and a validity of the full TTL from that
// attempt, well before its next redisproto.Heartbeat.
func TestFairWaitConfirmsHandOff(t *testing.T) {
	c, d := queueDriver(t)
	ctx := testCtx(t, 30*time.Second)
	const ttl = 30 * time.Second
	key := "confirmed"
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
	go func() {
		g, err := d.Wait(ctx, backend.Request{Key: key, Owner: "waiter", TTL: ttl})
		got <- result{g, err, time.Now()}
	}()
	// Release once the waiter is queued.
	for deadline := time.Now().Add(5 * time.Second); ; {
		if n, _ := c.ZCard(ctx, d.keys(key).Queue).Result(); n == 1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the waiter never queued")
		}
		time.Sleep(5 * time.Millisecond)
	}
	released := time.Now()
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
	if r.done.Sub(released) > redisproto.Heartbeat(ttl)/2 {
		t.Errorf("the waiter took %v after the release: woken by its redisproto.Heartbeat, not by the hand-off message", r.done.Sub(released))
	}
	// The grant counts the full TTL from the confirming attempt, sent after
	// the release began.
	if r.g.TTL != 0 || r.g.ValidFrom.Before(released) || r.g.ValidFrom.After(r.done) {
		t.Errorf("grant: TTL %v from %v after the release; want the full TTL from the confirming attempt",
			r.g.TTL, r.g.ValidFrom.Sub(released))
	}
	if pttl := c.PTTL(ctx, d.keys(key).Lock).Val(); pttl < ttl-time.Second {
		t.Errorf("a confirmed hand-off lives %v, want about the full TTL %v", pttl, ttl)
	}
}

// TestForgedHandOff: in queue mode a message on a waiter's inbox is not a
// grant by itself. A client that may PUBLISH (and read the queue) forges a
// hand-off naming the waiter's wait, attempt and any token while another
// client holds the lock: the waiter must not report the lock held; it gets
// the lock when the holder releases, with the real next token.
func TestForgedHandOff(t *testing.T) {
	c, d := queueDriver(t)
	ctx := testCtx(t, 30*time.Second)
	const key, ttl = "forged", 10 * time.Second
	held, err := d.TryAcquire(ctx, backend.Request{Key: key, Owner: "holder", TTL: ttl})
	if err != nil {
		t.Fatal(err)
	}
	type result struct {
		g   backend.Grant
		err error
	}
	got := make(chan result, 1)
	go func() {
		g, err := d.Wait(ctx, backend.Request{Key: key, Owner: "waiter", TTL: ttl})
		got <- result{g, err}
	}()
	ks := d.keys(key)
	var entry string
	for deadline := time.Now().Add(5 * time.Second); entry == ""; {
		entry = c.HGet(ctx, ks.Alive, "waiter").Val()
		if time.Now().After(deadline) {
			t.Fatal("the waiter never queued")
		}
		time.Sleep(5 * time.Millisecond)
	}
	// "deadline:ttl:window:wait:attempt:inbox"
	f := strings.SplitN(entry, ":", 6)
	if len(f) != 6 {
		t.Fatalf("queue entry %q", entry)
	}
	for a := 0; a < 20; a++ {
		for _, msg := range []string{
			"h:" + f[3] + ":" + fmt.Sprint(a) + ":999",
			"h:" + f[3],
		} {
			if err := c.Publish(ctx, f[5], msg).Err(); err != nil {
				t.Fatal(err)
			}
		}
	}
	select {
	case r := <-got:
		if r.err == nil {
			_ = r.g.Lock.Release(ctx)
		}
		t.Fatalf("a forged hand-off message made the waiter report the lock (token %d, err %v) while another client holds it", r.g.Token, r.err)
	case <-time.After(500 * time.Millisecond):
	}
	if err := held.Lock.Release(ctx); err != nil {
		t.Fatal(err)
	}
	r := <-got
	if r.err != nil {
		t.Fatal(r.err)
	}
	defer r.g.Lock.Release(ctx)
	if r.g.Token != held.Token+1 {
		t.Errorf("the waiter's token is %d, want the lock's next %d", r.g.Token, held.Token+1)
	}
}

// TestHostileQueueEntries: queue entries the driver could not have written
// (a client with write access to the keys, or a bug in another version)
// are skipped and dropped, never an error that jams the key.
func TestHostileQueueEntries(t *testing.T) {
	c, d := queueDriver(t)
	ctx := testCtx(t, 30*time.Second)
	const key = "hostile-queue"
	ks := d.keys(key)
	for i, entry := range []string{"", "junk", ":::", "-5:1:1:w:0:x", "99999999999999999999999:1", "1e400:1:1:w:0:x"} {
		member := fmt.Sprintf("hostile-%d", i)
		if err := c.ZAdd(ctx, ks.Queue, redis.Z{Score: float64(i), Member: member}).Err(); err != nil {
			t.Fatal(err)
		}
		if err := c.HSet(ctx, ks.Alive, member, entry).Err(); err != nil {
			t.Fatal(err)
		}
	}
	g, err := d.TryAcquire(ctx, backend.Request{Key: key, Owner: "owner", TTL: 10 * time.Second})
	if err != nil {
		t.Fatalf("TryAcquire with malformed queue entries ahead: %v", err)
	}
	if err := g.Lock.Release(ctx); err != nil {
		t.Fatal(err)
	}
}
