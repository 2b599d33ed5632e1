package redislock_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/distlock/distlock"
	"github.com/distlock/distlock/redislock"
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

// Build the driver over a client the program already has: a *redis.Client,
// or a *redis.ClusterClient (any redis.UniversalClient). The driver never
// closes the client, so close it after the Locker.
func ExampleNew() {
	rdb := redis.NewClient(&redis.Options{Addr: "127.0.0.1:6379"})
	defer rdb.Close()

	d, err := redislock.New(rdb, &redislock.Options{Prefix: "billing"})
	if err != nil {
		log.Fatal(err)
	}
	locker := distlock.New(d, distlock.WithDefaultTTL(15*time.Second)) // owns d, not rdb
	defer locker.Close()

	ctx := context.Background()
	lease, err := locker.TryAcquire(ctx, "cron/invoices")
	if errors.Is(err, distlock.ErrNotAcquired) {
		fmt.Println("another instance is sending the invoices")
		return
	}
	if err != nil {
		log.Fatal(err)
	}
	defer func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = lease.Release(ctx)
	}()
	fmt.Println("sending the invoices with fencing token", lease.Token())
}
