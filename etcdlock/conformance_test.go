package etcdlock_test

import (
	"context"
	"testing"
	"time"

	"github.com/distlock/distlock/backend"
	"github.com/distlock/distlock/conformance"
	"github.com/distlock/distlock/internal/hooktest"
	"github.com/distlock/distlock/internal/insptest"
)

func runConformance(t *testing.T, nodes int) *cluster {
	c := startCluster(t, nodes)
	t.Logf("etcd: %s", c.g)
	prefix := "conformance/" + t.Name() + "/"
	conformance.Run(t, func(context.Context, *testing.T) (conformance.Harness, error) {
		return newHarness(c, prefix), nil
	}, conformance.Parallel(4))
	// Keys of dead or given-up clients expire with their lease.
	var left []string
	deadline := time.Now().Add(3 * testTTL)
	for {
		left = c.leftovers(t, prefix)
		if len(left) == 0 || time.Now().After(deadline) {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	if len(left) > 0 {
		t.Errorf("after the suite %d keys remain: %q", len(left), left)
	}
	return c
}

func TestConformanceSingle(t *testing.T) { runConformance(t, 1) }

func TestConformanceCluster(t *testing.T) {
	if testing.Short() {
		t.Skip("3-member cluster: skipped in -short mode")
	}
	c := runConformance(t, 3)
	t.Run("QueueChurn", func(t *testing.T) { testQueueChurn(t, c) })
}

// TestHarnessHooks checks the harness's Partitioner and ReplyDropper
// (per-driver proxies) before the conformance cases rely on them.
func TestHarnessHooks(t *testing.T) {
	c := startCluster(t, 1)
	hooktest.Run(t, newHarness(c, "hooktest/"))
}

// TestInspectors checks InspectSemaphore and InspectRW against grants.
func TestInspectors(t *testing.T) {
	insptest.Run(t, newHarness(startCluster(t, 1), "insptest/"))
}

var _ conformance.UserClients = (*harness)(nil)

// userHarness is the harness with NewDriver making user drivers, so that
// hooktest checks the hooks on drivers over user-made clients too.
type userHarness struct{ *harness }

func (h userHarness) NewDriver(ctx context.Context) (backend.Driver, error) {
	return h.NewUserDriver(ctx)
}

// TestHarnessHooksUserClients checks Partitioner and ReplyDropper on
// drivers over user-made clients (conformance.UserClients says they work
// there).
func TestHarnessHooksUserClients(t *testing.T) {
	hooktest.Run(t, userHarness{newHarness(startCluster(t, 1), "hooktest-user/")})
}
