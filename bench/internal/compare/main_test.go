package compare

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain makes the test binary a crash-recovery holder when a test
// started it as one (TestCrashRecoveryHolderProcess), as a command's main
// does.
func TestMain(m *testing.M) {
	HolderMain()
	goleak.VerifyTestMain(m)
}
