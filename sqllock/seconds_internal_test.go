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
