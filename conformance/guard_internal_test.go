package conformance

import (
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"
)

const guardChildEnv = "DISTLOCK_CONFORMANCE_GUARD_CHILD"

// A case that hangs fails with the goroutines' stacks, gets its harness
// closed (which unblocks it here), and returns: the test binary goes on
// (no panic) and the harness has cleaned up.
func TestHungCaseClosesHarness(t *testing.T) {
	if os.Getenv(guardChildEnv) != "" {
		unblock := make(chan struct{})
		closed := false
		runGuarded(t, "Hangs", 100*time.Millisecond, func() { <-unblock }, func() error {
			closed = true
			close(unblock)
			return nil
		})
		t.Logf("returned; harness closed: %v", closed)
		return
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestHungCaseClosesHarness$", "-test.v")
	cmd.Env = append(os.Environ(), guardChildEnv+"=1")
	out, err := cmd.CombinedOutput()
	if err == nil {
		t.Fatalf("a hung case did not fail:\n%s", out)
	}
	for _, want := range []string{"case Hangs still running after", "returned; harness closed: true", "--- FAIL: TestHungCaseClosesHarness"} {
		if !strings.Contains(string(out), want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(string(out), "panic:") {
		t.Errorf("the hung case panicked the binary:\n%s", out)
	}
}

// Every case marked exclusive exists: a renamed case would otherwise run
// in parallel with the others while it stops the store.
func TestExclusiveCasesExist(t *testing.T) {
	names := map[string]bool{}
	for _, c := range cases {
		names[c.name] = true
	}
	for name := range exclusive {
		if !names[name] {
			t.Errorf("exclusive case %q is not in the suite", name)
		}
	}
}
