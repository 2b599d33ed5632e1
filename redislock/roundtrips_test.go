package redislock

import (
	"context"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/distlock/distlock"
	"github.com/distlock/distlock/sandbox"
)

// TestRoundTripsPerPair counts, on the wire, what one uncontended
// acquire + release through a Locker costs (docs/redis.md quotes these
// figures beside the peers'): a single server takes one script per
// acquire and one per release, in queue and notify mode alike (redsync and
// bsm/redislock also take two round trips); Redlock takes one command per
// node per phase, all nodes at once: two parallel rounds in all (as
// redsync's Redlock), the fencing token needing no second round when the
// nodes' counters agree. Deterministic: it counts commands, and rounds
// with a barrier that lets a node's command through only when every
// node's command of that round has arrived (a command sent one node after
// another waits at the barrier until its bound, and the test fails).
func TestRoundTripsPerPair(t *testing.T) {
	const pairs = 5
	ctx := testCtx(t, 2*time.Minute)
	pair := func(t *testing.T, l *distlock.Locker, key string) {
		t.Helper()
		le, err := l.Acquire(ctx, key)
		if err != nil {
			t.Fatal(err)
		}
		if err := le.Release(ctx); err != nil {
			t.Fatal(err)
		}
	}

	t.Run("single", func(t *testing.T) {
		g := sandbox.StartT(t, sandbox.Spec{Kind: sandbox.Redis})
		for _, mode := range []WaitMode{WaitQueue, WaitNotify} {
			t.Run(mode.String(), func(t *testing.T) {
				l, h, _ := countedLocker(t, g.Node(0), &Options{Wait: mode})
				key := "roundtrips-" + mode.String()
				// The warm-up also makes the subscriptions.
				h.twoScriptsEach(t, "", pairs, func(int) { pair(t, l, key) })
			})
		}
	})

	t.Run("redlock", func(t *testing.T) {
		g := sandbox.StartT(t, sandbox.Spec{Kind: sandbox.Redis, Nodes: 3})
		b := newBarrier(len(g.Nodes()))
		var clients []redis.UniversalClient
		hooks := make([]*countingHook, len(g.Nodes()))
		for i, n := range g.Nodes() {
			c := nodeClient(n)
			defer c.Close()
			hooks[i] = &countingHook{barrier: b}
			c.AddHook(hooks[i])
			clients = append(clients, c)
		}
		d, err := newRedlock(clients, nil)
		if err != nil {
			t.Fatal(err)
		}
		l := distlock.New(d, distlock.WithDefaultTTL(time.Minute))
		defer l.Close()
		pair(t, l, "roundtrips-redlock") // warm-up: scripts loaded
		for _, h := range hooks {
			h.reset()
		}
		b.reset(true)
		for range pairs {
			pair(t, l, "roundtrips-redlock")
		}
		rounds, late := b.reset(false)
		for i, h := range hooks {
			if got := h.calls(); !slices.Equal(got, []string{"evalsha", "evalsha"}) || h.n != 2*pairs {
				t.Errorf("node %d: %d pairs sent %d commands (one pair: %v), want 2 EVALSHA per pair", i, pairs, h.n, got)
			}
		}
		if late > 0 || rounds != 2*pairs {
			t.Errorf("%d pairs took %d parallel rounds (%d commands reached the barrier without the other nodes'), want 2 per pair", pairs, rounds, late)
		}
	})
}

// countedLocker returns a Locker (default TTL one minute) over a driver
// with opts on a client of n of its own, whose commands h counts; both are
// closed when t ends.
func countedLocker(t *testing.T, n sandbox.Node, opts *Options) (l *distlock.Locker, h *countingHook, c *redis.Client) {
	t.Helper()
	c = nodeClient(n)
	t.Cleanup(func() { c.Close() })
	h = &countingHook{}
	c.AddHook(h)
	d, err := New(c, opts)
	if err != nil {
		t.Fatal(err)
	}
	l = distlock.New(d, distlock.WithDefaultTTL(time.Minute))
	t.Cleanup(func() { l.Close() })
	return l, h, c
}

// twoScriptsEach runs pair once (loading the scripts), then pairs times
// counted by h (pair(i), i from 0), and reports (with what, if not empty)
// a pair that did not cost one EVALSHA to acquire and one to release.
func (h *countingHook) twoScriptsEach(t *testing.T, what string, pairs int, pair func(i int)) {
	t.Helper()
	pair(0) // warm-up: scripts loaded
	h.reset()
	for i := range pairs {
		pair(i)
	}
	if what != "" {
		what += ": "
	}
	if got := h.calls(); !slices.Equal(got, []string{"evalsha", "evalsha"}) || h.n != 2*pairs {
		t.Errorf("%s%d pairs sent %d commands (one pair: %v), want 2 EVALSHA per pair", what, pairs, h.n, got)
	}
}

// countingHook counts a client's commands (a pipeline counts each of its
// commands), remembers the names of the last two, and, with a barrier,
// holds each command until the other nodes' commands of its round arrive.
type countingHook struct {
	barrier *barrier
	mu      sync.Mutex
	n       int
	last    []string
}

func (h *countingHook) reset() {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.n, h.last = 0, nil
}

func (h *countingHook) calls() []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	return slices.Clone(h.last)
}

func (h *countingHook) record(cmds ...redis.Cmder) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, c := range cmds {
		h.n++
		h.last = append(h.last, c.Name())
		if len(h.last) > 2 {
			h.last = h.last[1:]
		}
	}
}

func (h *countingHook) DialHook(next redis.DialHook) redis.DialHook { return next }

func (h *countingHook) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		h.record(cmd)
		if h.barrier != nil {
			h.barrier.arrive()
		}
		return next(ctx, cmd)
	}
}

func (h *countingHook) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		h.record(cmds...)
		if h.barrier != nil {
			h.barrier.arrive()
		}
		return next(ctx, cmds)
	}
}

// barrier lets commands through in rounds of n (one per node), counting
// the rounds; a command whose round is not complete within its bound goes
// through anyway and counts as late.
type barrier struct {
	n      int
	mu     sync.Mutex
	on     bool
	count  int           // commands arrived in the current round
	open   chan struct{} // closed when the current round is complete
	rounds int
	late   int
}

func newBarrier(n int) *barrier { return &barrier{n: n, open: make(chan struct{})} }

// barrierWait bounds a command's wait for its round (far below the
// Redlock node timeout of a one-minute TTL, so the driver waits for it).
const barrierWait = 3 * time.Second

func (b *barrier) arrive() {
	b.mu.Lock()
	if !b.on {
		b.mu.Unlock()
		return
	}
	b.count++
	open := b.open
	if b.count == b.n {
		b.rounds++
		b.count = 0
		close(b.open)
		b.open = make(chan struct{})
	}
	b.mu.Unlock()
	select {
	case <-open:
	case <-time.After(barrierWait):
		b.mu.Lock()
		b.late++
		b.mu.Unlock()
	}
}

// reset switches the barrier on or off and returns the rounds completed
// and the late commands since the last reset.
func (b *barrier) reset(on bool) (rounds, late int) {
	b.mu.Lock()
	defer b.mu.Unlock()
	rounds, late = b.rounds, b.late
	b.on, b.rounds, b.late, b.count = on, 0, 0, 0
	return rounds, late
}
