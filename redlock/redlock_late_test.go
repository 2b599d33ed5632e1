package redlock

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/distlock/distlock/backend"
	"github.com/distlock/distlock/sandbox"
)

// gateHook holds back the next command a client sends (one, when armed)
// until the gate is opened (or 10 s passed: bounded, the test fails on
// its own), then sends it.
type gateHook struct {
	armed atomic.Bool
	gate  chan struct{}
}

func (h *gateHook) DialHook(next redis.DialHook) redis.DialHook { return next }
func (h *gateHook) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}
func (h *gateHook) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		if h.armed.CompareAndSwap(true, false) {
			select {
			case <-h.gate:
			case <-time.After(10 * time.Second):
			}
		}
		return next(ctx, cmd)
	}
}

// TestRedlockSlowNodeNotAwaited: once the first node and one more granted
// with the same token, the grant is decided, and TryAcquire returns
// without waiting for the third node (here held back until TryAcquire has
// returned, within its answer time of TTL/9 = 6.7 s). Its grant, when it comes, is the attempt's
// hold like the others: Release frees it too, whether the grant came
// before Release (kept) or after (given back by the late call itself,
// since Release's release reached the node first and found nothing).
// The old code waited for every node.
func TestRedlockSlowNodeNotAwaited(t *testing.T) {
	g := sandbox.StartT(t, sandbox.Spec{Kind: sandbox.Redis, Nodes: 3})
	ctx := testCtx(t, time.Minute)
	h := &gateHook{}
	r, clients := nodeDriver(t, g)
	clients[2].AddHook(h)
	ks := r.keys("slow")
	// heldOn2 polls node 2 (at most 3 s) until its lock exists as want.
	heldOn2 := func(want bool) bool {
		for range 300 {
			n, err := clients[2].Exists(ctx, ks.Lock).Result()
			if err != nil {
				t.Fatal(err)
			}
			if (n == 1) == want {
				return true
			}
			time.Sleep(10 * time.Millisecond)
		}
		return false
	}
	// counted2 polls node 2 (at most 3 s) until its fencing counter
	// reached n: the slow grant's script ran.
	counted2 := func(n int64) bool {
		for range 300 {
			v, err := clients[2].Get(ctx, ks.Fence).Int64()
			if err != nil && err != redis.Nil {
				t.Fatal(err)
			}
			if v >= n {
				return true
			}
			time.Sleep(10 * time.Millisecond)
		}
		return false
	}
	req := backend.Request{Key: "slow", Owner: "o", TTL: time.Minute}
	for round, grantFirst := range []bool{true, false} {
		h.gate = make(chan struct{})
		h.armed.Store(true)
		type result struct {
			g   backend.Grant
			err error
		}
		got := make(chan result, 1)
		go func() {
			gr, err := r.TryAcquire(ctx, req)
			got <- result{gr, err}
		}()
		var gr backend.Grant
		select {
		case res := <-got:
			if res.err != nil {
				t.Fatal(res.err)
			}
			gr = res.g
		case <-time.After(5 * time.Second):
			close(h.gate)
			<-got
			t.Fatal("TryAcquire did not return while the third node was held back: it waited for it")
		}
		if grantFirst {
			close(h.gate)
			if !heldOn2(true) {
				t.Fatal("the slow node never granted")
			}
		}
		if err := gr.Lock.Release(ctx); err != nil {
			t.Fatal(err)
		}
		if !grantFirst {
			close(h.gate) // after Release reached node 2 (on another connection)
		}
		if !counted2(int64(round) + 1) {
			t.Fatal("the slow node never granted")
		}
		if !heldOn2(false) {
			t.Errorf("grant before release %v: node 2 still holds the lock after Release", grantFirst)
		}
		for i := range 2 {
			if n, err := clients[i].Exists(ctx, ks.Lock).Result(); err != nil || n != 0 {
				t.Errorf("node %d: lock exists %d (%v) after Release", i, n, err)
			}
		}
	}
}
