package redisproto

import (
	"fmt"
	"time"

	"github.com/distlock/distlock/backend"
)

// MinTTL is the shortest lease TTL the driver accepts. Redis expires keys
// with millisecond precision; shorter leases would be all drift margin.
const MinTTL = 10 * time.Millisecond

// MaxTTL is the longest lease TTL the driver accepts: the library's limit
// (backend.TTLLimit). Redis itself keeps far longer expiries; the limit
// keeps every millisecond count exact in Lua's numbers.
const MaxTTL = backend.TTLLimit

// WaitMode is how waiters of a held lock wait for it.
type WaitMode uint8

const (
	// WaitDefault picks WaitQueue where supported, else WaitNotify.
	WaitDefault WaitMode = iota
	// WaitQueue (URL wait=queue): waiters queue in Redis in arrival order
	// and a release hands the lock to the oldest live waiter, whose grant
	// is the hand-off message itself (capabilities WaitQueue, Fair). A
	// TryAcquire never jumps the queue (in Redlock mode: never on the
	// first node, where the queue is; see docs/redis.md). Not supported
	// with WaitReplicas.
	WaitQueue
	// WaitNotify (URL wait=notify): a release is announced on the key's
	// channel and every waiter retries; the first to arrive wins, which may
	// be the releaser itself (no fairness, more round trips under
	// contention).
	WaitNotify
)

// String returns the URL spelling of m.
func (m WaitMode) String() string {
	switch m {
	case WaitDefault:
		return "default"
	case WaitQueue:
		return "queue"
	case WaitNotify:
		return "notify"
	}
	return fmt.Sprintf("WaitMode(%d)", uint8(m))
}

// OptionPrefix is an Options.Prefix as a driver uses it: DefaultPrefix if
// prefix is empty, else prefix once CheckPrefix finds nothing wrong with
// it; if it does, an error of the driver named driver matching
// backend.ErrInvalidConfig.
func OptionPrefix(driver, prefix string) (string, error) {
	if prefix == "" {
		return DefaultPrefix, nil
	}
	if err := CheckPrefix(prefix); err != nil {
		return prefix, fmt.Errorf("%s: %w: %v", driver, backend.ErrInvalidConfig, err)
	}
	return prefix, nil
}
