package redlock

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/distlock/distlock"
	"github.com/distlock/distlock/conformance"
	"github.com/distlock/distlock/internal/hooktest"
	"github.com/distlock/distlock/internal/testctx"
	"github.com/distlock/distlock/sandbox"
)

func TestConformance(t *testing.T) {
	if testing.Short() {
		t.Skip("short mode")
	}
	g := sandbox.StartT(t, sandbox.Spec{Kind: sandbox.Redis, Nodes: 3})
	conformance.Run(t, newHarness(g).Maker(), conformance.Parallel(4))
}

// TestConformance runs the default wait mode (queue); this runs the other
// one.
func TestConformanceNotify(t *testing.T) {
	if testing.Short() {
		t.Skip("short mode")
	}
	g := sandbox.StartT(t, sandbox.Spec{Kind: sandbox.Redis, Nodes: 3})
	h := newHarness(g)
	h.Opts = &Options{Wait: WaitNotify}
	conformance.Run(t, h.Maker(), conformance.Parallel(4))
}

// TestHarnessHooks checks the harness's Partitioner and ReplyDropper
// (per-driver proxies) over three nodes before the conformance cases rely
// on them.
func TestHarnessHooks(t *testing.T) {
	if testing.Short() {
		t.Skip("short mode")
	}
	g := sandbox.StartT(t, sandbox.Spec{Kind: sandbox.Redis, Nodes: 3})
	h, err := newHarness(g).Maker()(t.Context(), t)
	if err != nil {
		t.Fatal(err)
	}
	hooktest.Run(t, h)
}

// testCtx returns a context that ends after d (testctx.For).
var testCtx = testctx.For

// TestRedlockMinorityDown: with one of three nodes dead, locks still work
// and tokens still grow; with two dead, acquisitions fail as unavailable.
func TestRedlockMinorityDown(t *testing.T) {
	g := sandbox.StartT(t, sandbox.Spec{Kind: sandbox.Redis, Nodes: 3})
	h := newHarness(g)
	defer h.Close()
	d, err := h.NewDriver(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	l := distlock.New(d, distlock.WithDefaultTTL(time.Second))
	defer l.Close()
	first := mustHold(t, l, "minority")
	if err := first.Release(testCtx(t, 5*time.Second)); err != nil {
		t.Fatal(err)
	}
	if err := g.Node(0).Kill(testCtx(t, time.Minute)); err != nil {
		t.Fatal(err)
	}
	second := mustHold(t, l, "minority")
	if second.Token() <= first.Token() {
		t.Errorf("token %d after %d with one node down", second.Token(), first.Token())
	}
	time.Sleep(1500 * time.Millisecond) // renewals with one node down
	if second.Err() != nil {
		t.Fatalf("lease lost with a majority alive: %v", second.Err())
	}
	if err := second.Release(testCtx(t, 5*time.Second)); err != nil {
		t.Fatal(err)
	}
	if err := g.Node(1).Kill(testCtx(t, time.Minute)); err != nil {
		t.Fatal(err)
	}
	_, err = l.TryAcquire(testCtx(t, 10*time.Second), "minority")
	if !errors.Is(err, distlock.ErrUnavailable) {
		t.Errorf("with 2 of 3 nodes down TryAcquire = %v, want ErrUnavailable", err)
	}
}
