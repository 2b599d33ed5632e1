package sqllock_test

import (
	"context"
	"os"
	"testing"

	"github.com/distlock/distlock/conformance"
	"github.com/distlock/distlock/internal/hooktest"
)

// TestPostgresConformance runs the suite against PostgreSQL.
func TestPostgresConformance(t *testing.T) {
	s := startPG(t)
	conformance.Run(t, func(context.Context, *testing.T) (conformance.Harness, error) {
		return newPGHarness(s, conformanceTTL), nil
	})
}

// TestPostgresHarnessHooks checks the harness's Partitioner and
// ReplyDropper before the conformance cases rely on them.
func TestPostgresHarnessHooks(t *testing.T) {
	s := startPG(t)
	hooktest.Run(t, newPGHarness(s, conformanceTTL))
}

// TestPostgresAdvisoryConformance runs the suite in advisory mode
// (pg_advisory_xact_lock). The server sees the same statements in both
// providers, so it runs in the local one only (CI time).
func TestPostgresAdvisoryConformance(t *testing.T) {
	if os.Getenv("DISTLOCK_SANDBOX") == "docker" {
		t.Skip("advisory mode's conformance runs in the local provider")
	}
	s := startPG(t)
	conformance.Run(t, func(context.Context, *testing.T) (conformance.Harness, error) {
		h := newPGHarness(s, conformanceTTL)
		h.advisory = true
		return h, nil
	})
}
