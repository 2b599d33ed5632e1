package redlock

import (
	"log/slog"
	"testing"

	"github.com/distlock/distlock/internal/leakcheck"
)

// TestMain checks for leaked goroutines. Most tests' clients ignore ctx
// deadlines (no ContextTimeoutEnabled), so New warns about every one of
// them through slog.Default(): the tests discard those warnings
// (TestNewWarnsUnboundedClient checks them).
func TestMain(m *testing.M) {
	slog.SetDefault(slog.New(slog.DiscardHandler))
	leakcheck.VerifyTestMain(m, nil)
}
