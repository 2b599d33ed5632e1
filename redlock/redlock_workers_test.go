package redlock

import (
	"bytes"
	"context"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/distlock/distlock/backend"
	"github.com/distlock/distlock/sandbox"
)

// goroutineHook records, for every command a client sends, the goroutine
// that sent it (its number, from the stack trace's header).
type goroutineHook struct {
	mu  sync.Mutex
	ids map[string]int
}

func (h *goroutineHook) DialHook(next redis.DialHook) redis.DialHook { return next }
func (h *goroutineHook) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}
func (h *goroutineHook) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		buf := make([]byte, 64)
		buf = buf[:runtime.Stack(buf, false)]
		id, _, _ := bytes.Cut(bytes.TrimPrefix(buf, []byte("goroutine ")), []byte(" "))
		h.mu.Lock()
		h.ids[string(id)]++
		h.mu.Unlock()
		return next(ctx, cmd)
	}
}

// TestRedlockNodeCallWorkers: Redlock's node calls run on worker
// goroutines that outlive a call, not on a new goroutine each: a new one
// grows its stack through go-redis's call depth on every call (the copies
// were about a fifth of the client's CPU in a Redlock pair). 100 pairs one
// after another, 6 node calls each, must come from a handful of
// goroutines (one per node at a time, plus the odd extra when a worker is
// not yet back when the next round starts); the old code used 600. After
// Close no worker is left (leakcheck checks the package at exit).
func TestRedlockNodeCallWorkers(t *testing.T) {
	g := sandbox.StartT(t, sandbox.Spec{Kind: sandbox.Redis, Nodes: 3})
	ctx := testCtx(t, time.Minute)
	h := &goroutineHook{ids: map[string]int{}}
	clients := nodeClients(t, g)
	r, err := New(clients, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range clients {
		c.AddHook(h) // after New's own checks
	}
	const pairs = 100
	req := backend.Request{Key: "workers", Owner: "o", TTL: 10 * time.Second}
	for range pairs {
		gr, err := r.TryAcquire(ctx, req)
		if err != nil {
			t.Fatal(err)
		}
		if err := gr.Lock.Release(ctx); err != nil {
			t.Fatal(err)
		}
	}
	if err := r.Close(); err != nil {
		t.Fatal(err)
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	calls := 0
	for _, n := range h.ids {
		calls += n
	}
	t.Logf("%d commands from %d goroutines", calls, len(h.ids))
	if calls < pairs*2*len(clients) {
		t.Fatalf("%d commands for %d pairs on %d nodes, want at least %d", calls, pairs, len(clients), pairs*2*len(clients))
	}
	if len(h.ids) > 4*len(clients) {
		t.Errorf("%d commands came from %d goroutines, want node calls on long-lived workers (at most %d)", calls, len(h.ids), 4*len(clients))
	}
}
