package redislock

import (
	"errors"
	"fmt"
	"maps"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/distlock/distlock"
	"github.com/distlock/distlock/backend"
	"github.com/distlock/distlock/internal/redisproto"
	"github.com/distlock/distlock/sandbox"
)

// oneByOne hides a driver's TryAcquireMulti: the Locker takes a
// multi-lock's keys one by one, as it did before the one-step path.
type oneByOne struct {
	backend.Driver
	backend.Waiter
	backend.Notifier
}

// TestRoundTripsMultiLock counts on the wire what TryAcquireAll of three
// free keys sends to a single server: one EVALSHA (multiScript), where
// the keys taken one by one cost one per key; in both wait modes.
func TestRoundTripsMultiLock(t *testing.T) {
	g := sandbox.StartT(t, sandbox.Spec{Kind: sandbox.Redis})
	ctx := testCtx(t, time.Minute)
	for _, mode := range []WaitMode{WaitQueue, WaitNotify} {
		for _, tc := range []struct {
			name string
			want int
		}{{"one-step", 1}, {"one-by-one", 3}} {
			t.Run(mode.String()+"/"+tc.name, func(t *testing.T) {
				c := nodeClient(g.Node(0))
				defer c.Close()
				h := &countingHook{}
				c.AddHook(h)
				d, err := New(c, &Options{Wait: mode})
				if err != nil {
					t.Fatal(err)
				}
				var bd backend.Driver = d
				if tc.want > 1 {
					bd = oneByOne{d, d, d}
				}
				l := distlock.New(bd, distlock.WithDefaultTTL(time.Minute))
				defer l.Close()
				keys := []string{"rt-multi-c-" + t.Name(), "rt-multi-a-" + t.Name(), "rt-multi-b-" + t.Name()}
				for round := range 2 { // the first loads the script
					h.reset()
					m, err := l.TryAcquireAll(ctx, keys)
					if err != nil {
						t.Fatal(err)
					}
					h.mu.Lock()
					n := h.n
					h.mu.Unlock()
					last := h.calls()
					if err := m.Release(ctx); err != nil {
						t.Fatal(err)
					}
					if round == 1 && n != tc.want {
						t.Errorf("TryAcquireAll of 3 free keys sent %d commands (the last: %v), want %d", n, last, tc.want)
					}
				}
			})
		}
	}
}

// TestMultiLockScript checks what the conformance suite cannot see of
// multiScript: an owner's key held through another client is re-entered
// (the store counts holds per owner), keeping its token; a free key with
// a live waiter queued is refused (queue mode), as TryAcquire refuses it,
// and taken once that waiter is dead.
func TestMultiLockScript(t *testing.T) {
	g := sandbox.StartT(t, sandbox.Spec{Kind: sandbox.Redis})
	ctx := testCtx(t, time.Minute)
	a := singleLocker(t, g.Node(0), 5*time.Second)
	b := singleLocker(t, g.Node(0), 5*time.Second)
	if !b.Capabilities().MultiAtomic {
		t.Fatal("a single server's driver declares no MultiAtomic")
	}

	held, err := a.Acquire(ctx, "ms-1", distlock.WithOwner("multi-owner"))
	if err != nil {
		t.Fatal(err)
	}
	m, err := b.TryAcquireAll(ctx, []string{"ms-1", "ms-2"}, distlock.WithOwner("multi-owner"))
	if err != nil {
		t.Fatalf("TryAcquireAll by the owner of one key: %v", err)
	}
	if tok := m.Tokens()["ms-1"]; tok != held.Token() {
		t.Errorf("re-entered key's token %d, want the holder's %d", tok, held.Token())
	}
	if err := m.Release(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := b.TryAcquire(ctx, "ms-1", distlock.WithOwner("someone-else")); !errors.Is(err, distlock.ErrNotAcquired) {
		t.Errorf("after the multi-lease's release the other client's hold of ms-1 is gone: %v", err)
	}
	if err := held.Release(ctx); err != nil {
		t.Fatal(err)
	}

	// A free key whose queue has a live waiter (a lock about to be
	// handed on) is refused, as TryAcquire refuses it; once the entry is
	// dead (its waiter stopped renewing) both take the key.
	c := b.Driver().(*Driver).Client()
	ks := redisproto.KeysFor(DefaultPrefix, "ms-3")
	entry := func(deadline time.Time) {
		t.Helper()
		v := fmt.Sprintf("%d:60000:3000:0123456789abcdef:0:nowhere", deadline.UnixMilli())
		if err := c.ZAdd(ctx, ks.Queue, redis.Z{Score: float64(time.Now().UnixMilli()), Member: "ghost-waiter"}).Err(); err != nil {
			t.Fatal(err)
		}
		if err := c.HSet(ctx, ks.Alive, "ghost-waiter", v).Err(); err != nil {
			t.Fatal(err)
		}
	}
	entry(time.Now().Add(30 * time.Second))
	_, err = b.TryAcquireAll(ctx, []string{"ms-3", "ms-4"})
	if !errors.Is(err, distlock.ErrNotAcquired) || !strings.Contains(err.Error(), `"ms-3"`) {
		t.Errorf("TryAcquireAll of a free key with a live waiter queued: %v, want ErrNotAcquired naming ms-3", err)
	}
	if _, err := b.TryAcquire(ctx, "ms-3"); !errors.Is(err, distlock.ErrNotAcquired) {
		t.Errorf("TryAcquire of a free key with a live waiter queued: %v, want ErrNotAcquired", err)
	}
	entry(time.Now().Add(-time.Second))
	m, err = b.TryAcquireAll(ctx, []string{"ms-3", "ms-4"})
	if err != nil {
		t.Fatalf("TryAcquireAll of free keys with a dead waiter queued: %v", err)
	}
	if err := m.Release(ctx); err != nil {
		t.Fatal(err)
	}
}

// BenchmarkTryAcquireAll measures TryAcquireAll + Release of three free
// keys on a single server (queue mode), in one step and key by key.
func BenchmarkTryAcquireAll(b *testing.B) {
	g := sandbox.StartT(b, sandbox.Spec{Kind: sandbox.Redis})
	for _, name := range []string{"one-step", "one-by-one"} {
		b.Run(name, func(b *testing.B) {
			c := nodeClient(g.Node(0))
			defer c.Close()
			d, err := New(c, nil)
			if err != nil {
				b.Fatal(err)
			}
			var bd backend.Driver = d
			if name == "one-by-one" {
				bd = oneByOne{d, d, d}
			}
			l := distlock.New(bd, distlock.WithDefaultTTL(time.Minute))
			defer l.Close()
			ctx := b.Context()
			keys := []string{"bench-multi-a-" + name, "bench-multi-b-" + name, "bench-multi-c-" + name}
			for b.Loop() {
				m, err := l.TryAcquireAll(ctx, keys)
				if err != nil {
					b.Fatal(err)
				}
				if err := m.Release(ctx); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// TestServerCommandsMultiLock pins what TryAcquireAll of three free keys
// makes a single server run (queue mode), as Redis counts it: one
// script that checks each key (HGET of the owner, EXISTS of its queue)
// and then runs the single-key script for it (EXISTS of the lock and the
// queue, INCR, HSET, PEXPIRE): two calls per key more than three
// TryAcquires, in one round trip instead of three.
func TestServerCommandsMultiLock(t *testing.T) {
	ctx := testCtx(t, time.Minute)
	g := sandbox.StartT(t, sandbox.Spec{Kind: sandbox.Redis})
	l, _, c := countedLocker(t, g.Node(0), nil)
	keys := []string{"server-multi-a", "server-multi-b", "server-multi-c"}
	for round := range 2 { // the first loads the script
		if err := c.ConfigResetStat(ctx).Err(); err != nil {
			t.Fatal(err)
		}
		m, err := l.TryAcquireAll(ctx, keys)
		if err != nil {
			t.Fatal(err)
		}
		got := commandCounts(ctx, t, c)
		if err := m.Release(ctx); err != nil {
			t.Fatal(err)
		}
		delete(got, "config|resetstat")
		want := map[string]int{"evalsha": 1, "hget": 3, "exists": 6, "incr": 3, "hset": 3, "pexpire": 3}
		if round == 1 && !maps.Equal(got, want) {
			t.Errorf("TryAcquireAll of 3 free keys ran %v in Redis, want %v", got, want)
		}
	}
}
