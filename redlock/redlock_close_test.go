package redlock

import (
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/distlock/distlock/backend"
	"github.com/distlock/distlock/sandbox"
)

// TestRedlockCloseDuringCalls: Close may run while acquisitions and
// releases are still starting their node calls (a Locker's Close abandons
// leases it could not release in time; a program may close its driver
// from another goroutine). Close must wait for every node call it let
// start and refuse the ones after it, without a data race between the
// calls starting and Close waiting for them (run with -race: before the
// fix a call could start, sync.WaitGroup.Add from zero, concurrently with
// Close's Wait). Every call after Close fails with ErrClosed or, if it had
// already started, with its own outcome; none panics or hangs.
func TestRedlockCloseDuringCalls(t *testing.T) {
	g := sandbox.StartT(t, sandbox.Spec{Kind: sandbox.Redis, Nodes: 3})
	ctx := testCtx(t, time.Minute)
	clients := nodeClients(t, g)
	const rounds, workers = 20, 4
	for round := range rounds {
		r, err := New(clients, nil)
		if err != nil {
			t.Fatal(err)
		}
		var wg sync.WaitGroup
		start := make(chan struct{})
		for w := range workers {
			wg.Go(func() {
				<-start
				req := backend.Request{Key: "close-race", Owner: "o" + string(rune('a'+w)), TTL: time.Second}
				for range 50 {
					gr, err := r.TryAcquire(ctx, req)
					if err == nil {
						err = gr.Lock.Release(ctx)
					}
					if errors.Is(err, backend.ErrClosed) {
						return
					}
				}
			})
		}
		close(start)
		time.Sleep(time.Duration(round%5) * time.Millisecond)
		if err := r.Close(); err != nil {
			t.Errorf("round %d: Close: %v", round, err)
		}
		wg.Wait()
	}
}
