package conformance_test

import (
	"testing"

	"github.com/distlock/distlock/internal/leakcheck"
)

func TestMain(m *testing.M) { leakcheck.VerifyTestMain(m, nil) }
