package redislock_test

import (
	"context"
	"errors"
	"fmt"

	"github.com/distlock/distlock"
	_ "github.com/distlock/distlock/redislock"
)

// Every mistake in a URL is reported at once, before anything is dialed,
// naming the bad part but never the password.
func Example_invalidURL() {
	_, err := distlock.Open(context.Background(), "redis://app:secret@127.0.0.1:6379/0?ttl=10s&wait_replicas=1&colour=blue")
	fmt.Println(errors.Is(err, distlock.ErrInvalidConfig))
	fmt.Println(err)
	// Output:
	// true
	// distlock: open redis://app:xxxxx@127.0.0.1:6379/0?colour=xxxxx&ttl=10s&wait_replicas=1: redislock: invalid configuration: unknown parameter(s): colour
}
