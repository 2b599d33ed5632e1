package leakcheck

import (
	"strings"
	"testing"
	"time"
)

func TestMain(m *testing.M) { VerifyTestMain(m, nil) }

// A goroutine blocked for good is found and named; once it ends, Find
// answers nil.
func TestFindsARunningGoroutine(t *testing.T) {
	stop := make(chan struct{})
	started := make(chan struct{})
	go blockedForGood(started, stop)
	<-started
	err := Find(50 * time.Millisecond)
	if err == nil || !strings.Contains(err.Error(), "leakcheck.blockedForGood") {
		t.Fatalf("Find with a goroutine blocked on a channel = %v, want it named", err)
	}
	close(stop)
	if err := Find(Patience); err != nil {
		t.Fatalf("Find after the goroutine ended = %v, want nil", err)
	}
}

// The caller's own goroutine and the test runner's are not leaks.
func TestIgnoresTheTestRunner(t *testing.T) {
	if got := Running(); len(got) != 0 {
		t.Fatalf("Running() in a test with nothing started = %q, want none", got)
	}
}

func blockedForGood(started, stop chan struct{}) {
	close(started)
	<-stop
}
