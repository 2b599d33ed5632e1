package sqllock

import (
	"math"
	"testing"
	"time"
)

// Every duration the driver sends the server as whole seconds (the lock
// TTL, innodb_lock_wait_timeout) converts without overflow, rounded up so
// that the server's bound is never shorter than the client's.
func TestSecondsNoOverflow(t *testing.T) {
	for d, want := range map[time.Duration]int{
		time.Nanosecond:                  1,
		time.Second:                      1,
		time.Second + time.Nanosecond:    2,
		maxTTL:                           31536000,
		maxLockWaitTimeout:               1073741824,
		time.Duration(math.MaxInt64):     9223372037,
		time.Duration(math.MaxInt64 - 1): 9223372037,
	} {
		if got := seconds(d); got != want {
			t.Errorf("seconds(%v) = %d, want %d", d, got, want)
		}
	}
}

// TestManyNamedLocks: session mode refuses servers whose sessions hold one
// GET_LOCK name (a second frees the first).
func TestManyNamedLocks(t *testing.T) {
	for v, want := range map[string]bool{
		"10.11.6-MariaDB-0+deb12u1": true, "10.0.2-MariaDB": true, "10.0.1-MariaDB": false, "5.5.5-10.3.39-MariaDB": true,
		"8.0.36": true, "5.7.5-log": true, "5.7.4": false, "5.6.51": false,
	} {
		if got := manyNamedLocks(v); got != want {
			t.Errorf("manyNamedLocks(%q) = %v, want %v", v, got, want)
		}
	}
}
