package sqllock_test

import (
	"context"
	"testing"
	"time"

	"github.com/distlock/distlock/conformance"
	"github.com/distlock/distlock/internal/hooktest"
)

// TestConformance runs the suite with statements sent one at a time (with
// and without the procedure) and in batches (multiStatements, as a
// URL-opened Driver does).
func TestConformance(t *testing.T) {
	s := startServer(t)
	allModes(t, func(t *testing.T, m mode) {
		conformance.Run(t, func(context.Context, *testing.T) (conformance.Harness, error) {
			return newHarness(s, time.Second, m), nil
		})
	})
}

// TestHarnessHooks checks the harness's Partitioner and ReplyDropper
// (per-driver proxies) before the conformance cases rely on them.
func TestHarnessHooks(t *testing.T) {
	s := startServer(t)
	bothModes(t, func(t *testing.T, m mode) {
		hooktest.Run(t, newHarness(s, time.Second, m))
	})
}
