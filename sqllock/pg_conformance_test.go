package sqllock_test

import (
	"context"
	"testing"
	"time"

	"github.com/distlock/distlock/conformance"
	"github.com/distlock/distlock/internal/hooktest"
)

// TestPostgresConformance runs the suite against PostgreSQL.
func TestPostgresConformance(t *testing.T) {
	s := startPG(t)
	conformance.Run(t, func(context.Context, *testing.T) (conformance.Harness, error) {
		return newPGHarness(s, time.Second), nil
	})
}

// TestPostgresHarnessHooks checks the harness's Partitioner and
// ReplyDropper before the conformance cases rely on them.
func TestPostgresHarnessHooks(t *testing.T) {
	s := startPG(t)
	hooktest.Run(t, newPGHarness(s, time.Second))
}
