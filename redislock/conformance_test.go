package redislock

import (
	"testing"

	"github.com/distlock/distlock/conformance"
	"github.com/distlock/distlock/internal/hooktest"
	"github.com/distlock/distlock/internal/insptest"
	"github.com/distlock/distlock/sandbox"
)

func TestConformanceSingle(t *testing.T) {
	g := sandbox.StartT(t, sandbox.Spec{Kind: sandbox.Redis})
	conformance.Run(t, newHarness(g, "single").Maker(), conformance.Parallel(4))
}

func TestConformanceCluster(t *testing.T) {
	if testing.Short() {
		t.Skip("short mode")
	}
	g := sandbox.StartT(t, sandbox.Spec{Kind: sandbox.Redis, Topology: sandbox.Cluster})
	conformance.Run(t, newHarness(g, "cluster").Maker(), conformance.Parallel(4))
}

// TestConformanceSingle and TestConformanceCluster run the default wait
// mode (queue); these run the other one.

func TestConformanceNotify(t *testing.T) {
	g := sandbox.StartT(t, sandbox.Spec{Kind: sandbox.Redis})
	h := newHarness(g, "single")
	h.Opts = &Options{Wait: WaitNotify}
	conformance.Run(t, h.Maker(), conformance.Parallel(4))
}

func TestConformanceClusterNotify(t *testing.T) {
	if testing.Short() {
		t.Skip("short mode")
	}
	g := sandbox.StartT(t, sandbox.Spec{Kind: sandbox.Redis, Topology: sandbox.Cluster})
	h := newHarness(g, "cluster")
	h.Opts = &Options{Wait: WaitNotify}
	conformance.Run(t, h.Maker(), conformance.Parallel(4))
}

// TestHarnessHooks checks the harness's Partitioner and ReplyDropper
// (per-driver proxies) before the conformance cases rely on them.
func TestHarnessHooks(t *testing.T) {
	for _, tc := range []struct {
		mode string
		spec sandbox.Spec
	}{
		{"single", sandbox.Spec{Kind: sandbox.Redis}},
		{"cluster", sandbox.Spec{Kind: sandbox.Redis, Topology: sandbox.Cluster}},
	} {
		t.Run(tc.mode, func(t *testing.T) {
			if testing.Short() && tc.mode != "single" {
				t.Skip("short mode")
			}
			g := sandbox.StartT(t, tc.spec)
			h, err := newHarness(g, tc.mode).Maker()(t.Context(), t)
			if err != nil {
				t.Fatal(err)
			}
			hooktest.Run(t, h)
		})
	}
}

// TestInspectors checks InspectSemaphore and InspectRW against grants on
// a single server (a Cluster runs the same scripts on the key's slot).
func TestInspectors(t *testing.T) {
	h, err := newHarness(sandbox.StartT(t, sandbox.Spec{Kind: sandbox.Redis}), "single").Maker()(t.Context(), t)
	if err != nil {
		t.Fatal(err)
	}
	insptest.Run(t, h)
}
