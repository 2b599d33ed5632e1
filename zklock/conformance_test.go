package zklock

import (
	"context"
	"testing"

	"github.com/distlock/distlock/backend"
	"github.com/distlock/distlock/conformance"
	"github.com/distlock/distlock/internal/hooktest"
	"github.com/distlock/distlock/internal/insptest"
)

// TestConformance and TestConformanceEnsemble run 3 cases at a time, each
// with its own key prefix and sessions: 46 s for both (51-56 s under the
// CPU hog), 99 s one case at a time.
func TestConformance(t *testing.T) {
	c := startCluster(t, 1)
	conformance.Run(t, func(_ context.Context, t *testing.T) (conformance.Harness, error) {
		return conformanceHarness(c, t), nil
	}, conformance.Parallel(3))
}

func TestConformanceEnsemble(t *testing.T) {
	c := startCluster(t, 3)
	conformance.Run(t, func(_ context.Context, t *testing.T) (conformance.Harness, error) {
		return conformanceHarness(c, t), nil
	}, conformance.Parallel(3))
}

// TestHarnessHooks checks the harness's Partitioner and ReplyDropper
// (per-driver proxies) before the conformance cases rely on them.
func TestHarnessHooks(t *testing.T) {
	hooktest.Run(t, newHarness(startCluster(t, 1)))
}

// TestInspectors checks InspectSemaphore and InspectRW against grants.
func TestInspectors(t *testing.T) {
	insptest.Run(t, newHarness(startCluster(t, 1)))
}

var _ conformance.UserClients = (*harness)(nil)

// userHarness is the harness with NewDriver making user drivers, so that
// hooktest checks the hooks on drivers over user-made connections too.
type userHarness struct{ *harness }

func (h userHarness) NewDriver(ctx context.Context) (backend.Driver, error) {
	return h.NewUserDriver(ctx)
}

// TestHarnessHooksUserClients checks Partitioner and ReplyDropper on
// drivers over user-made connections (conformance.UserClients says they
// work there).
func TestHarnessHooksUserClients(t *testing.T) {
	hooktest.Run(t, userHarness{newHarness(startCluster(t, 1))})
}
