package redislock

import (
	"testing"
	"time"

	"github.com/distlock/distlock/backend"
	"github.com/distlock/distlock/sandbox"
)

// TestInspect checks the state Inspect reports for a held and a free lock,
// and the queue length in fair mode.
func TestInspect(t *testing.T) {
	g := sandbox.StartT(t, sandbox.Spec{Kind: sandbox.Redis})
	c := nodeClient(g.Node(0))
	defer c.Close()
	d, err := New(c, &Options{Wait: WaitQueue})
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	ctx := testCtx(t, 30*time.Second)
	gr, err := d.TryAcquire(ctx, backend.Request{Key: "inspect", Owner: "owner-a", TTL: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	// A second owner queues: its Wait runs until its ctx ends.
	wctx := testCtx(t, 300*time.Millisecond)
	done := make(chan error, 1)
	go func() {
		_, err := d.Wait(wctx, backend.Request{Key: "inspect", Owner: "owner-b", TTL: 5 * time.Second})
		done <- err
	}()
	time.Sleep(100 * time.Millisecond)
	info, err := d.Inspect(ctx, "inspect", backend.Exclusive)
	if err != nil {
		t.Fatal(err)
	}
	if !info.Held || info.Owner != "owner-a" || info.Token != gr.Token || info.TTL <= 0 || info.TTL > 5*time.Second || info.Waiters != 1 {
		t.Errorf("held: %+v (token %d)", info, gr.Token)
	}
	if err := <-done; err == nil {
		t.Fatal("the queued waiter got the lock while it was held")
	}
	if err := gr.Lock.Release(ctx); err != nil {
		t.Fatal(err)
	}
	info, err = d.Inspect(ctx, "inspect", backend.Exclusive)
	if err != nil {
		t.Fatal(err)
	}
	if info.Held || info.Token != gr.Token || info.Waiters != 0 {
		t.Errorf("free: %+v, want not held, last token %d, no waiters", info, gr.Token)
	}
}
