package compare

import (
	"context"
	"os"
	"strings"
	"testing"
	"time"

	_ "github.com/distlock/distlock/redislock"
	"github.com/distlock/distlock/sandbox"
)

// The crash-recovery workload's holder is the engine's own process (this
// test binary, through HolderMain), not a CLI's command: it holds the lock
// on a real store until SIGKILL, and the waiter gets the lock once the
// TTL ran out, not before.
func TestCrashRecoveryHolderProcess(t *testing.T) {
	g := sandbox.StartT(t, sandbox.Spec{Kind: sandbox.Redis})
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	ttl := time.Second
	c := Config{Exe: exe, TTL: ttl}.WithDefaults()
	var r Result
	if err := crashRecovery(t.Context(), Target{Name: "redis", URL: g.URL()}, c, &r); err != nil {
		t.Fatal(err)
	}
	rec, _ := r.Metric("recovery")
	if rec < 0.5*ttl.Seconds() || rec > 4*ttl.Seconds() {
		t.Errorf("recovery %.3fs with a TTL of %v: the holder process did not hold the lock until it was killed, or it was never freed", rec, ttl)
	}
}

// A holder process that cannot take the lock says why, and the workload
// fails with it instead of waiting.
func TestCrashRecoveryHolderFails(t *testing.T) {
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	c := Config{Exe: exe, TTL: time.Second}.WithDefaults()
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	_, err = killHolderProcess(ctx, exe, holderSpec{URL: "nosuch://x", Key: "k", TTL: c.TTL})
	if err == nil || !strings.Contains(err.Error(), "never held the lock") || !strings.Contains(err.Error(), "nosuch") {
		t.Errorf("holder with a bad URL: %v; want it never held the lock, saying why", err)
	}
}
