package main

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/distlock/distlock/memlock"
)

// A lost lease reads once: the line main prints says "distlock:" once
// (issue 32, item 8: "distlock: hold: distlock: lease on ... lost").
func TestLostLeaseReadsOnce(t *testing.T) {
	const url = "mem://hold-lost-once"
	_, closeStdin, done := startHold(t, context.Background(), url, 300*time.Millisecond)
	defer closeStdin()
	memlock.Named("hold-lost-once").Delete("job")
	select {
	case err := <-done:
		if code := classify(err); code != ExitLost {
			t.Fatalf("hold after its lock was deleted: %v (exit %d), want %d", err, code, ExitLost)
		}
		line := "distlock: " + strings.TrimPrefix(err.Error(), "distlock: ") // as main prints it
		if n := strings.Count(line, "distlock:"); n != 1 {
			t.Errorf("%q says distlock: %d times, want once", line, n)
		}
		if n := strings.Count(line, `"job"`); n > 2 {
			t.Errorf("%q names the key %d times", line, n)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("hold did not notice its lock was deleted")
	}
}
