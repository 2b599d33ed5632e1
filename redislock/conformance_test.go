package redislock

import (
	"testing"

	"github.com/distlock/distlock/conformance"
	"github.com/distlock/distlock/sandbox"
)

func TestConformanceSingle(t *testing.T) {
	g := sandbox.StartT(t, sandbox.Spec{Kind: sandbox.Redis})
	conformance.Run(t, newHarness(g, "single").maker())
}

func TestConformanceRedlock(t *testing.T) {
	if testing.Short() {
		t.Skip("short mode")
	}
	g := sandbox.StartT(t, sandbox.Spec{Kind: sandbox.Redis, Nodes: 3})
	conformance.Run(t, newHarness(g, "redlock").maker())
}

func TestConformanceCluster(t *testing.T) {
	if testing.Short() {
		t.Skip("short mode")
	}
	g := sandbox.StartT(t, sandbox.Spec{Kind: sandbox.Redis, Topology: sandbox.Cluster})
	conformance.Run(t, newHarness(g, "cluster").maker())
}

// TestConformanceSingle and TestConformanceCluster run the default wait
// mode (queue); these run the other one.

func TestConformanceNotify(t *testing.T) {
	g := sandbox.StartT(t, sandbox.Spec{Kind: sandbox.Redis})
	h := newHarness(g, "single")
	h.opts = &Options{Wait: WaitNotify}
	conformance.Run(t, h.maker())
}

func TestConformanceClusterNotify(t *testing.T) {
	if testing.Short() {
		t.Skip("short mode")
	}
	g := sandbox.StartT(t, sandbox.Spec{Kind: sandbox.Redis, Topology: sandbox.Cluster})
	h := newHarness(g, "cluster")
	h.opts = &Options{Wait: WaitNotify}
	conformance.Run(t, h.maker())
}
