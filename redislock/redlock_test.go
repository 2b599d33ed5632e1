package redislock

// The tests of both modes of a redis:// URL, and those comparing the
// single-server driver with Redlock, use package redlock (which imports
// nothing of this package: no cycle, and nothing new in a user's go.sum,
// the two share one module).
import (
	"github.com/distlock/distlock/redlock"
)

var newRedlock = redlock.New

// redlockOptions are package redlock's Options.
type redlockOptions = redlock.Options
