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

// Redlock takes each lock on a majority of independent Redis primaries (not
// replicas of one another), so a minority of them crashing loses no lock,
// provided they persist with appendfsync always (or stay down longer than
// the longest TTL). Its fencing tokens come from a majority too; see
// docs/redis.md for the argument and its limits.
func ExampleNewRedlock() {
	var clients []redis.UniversalClient
	for _, addr := range []string{"redis-a:6379", "redis-b:6379", "redis-c:6379"} {
		clients = append(clients, redis.NewClient(&redis.Options{Addr: addr}))
	}
	defer func() {
		for _, c := range clients {
			_ = c.Close()
		}
	}()

	d, err := redislock.NewRedlock(clients, nil)
	if err != nil {
		log.Fatal(err)
	}
	locker := distlock.New(d)
	defer locker.Close()

	err = locker.Do(context.Background(), "ledger/close-day", func(ctx context.Context) error {
		fmt.Println("closing the day") // ctx ends if the lock is lost
		return nil
	}, distlock.WithTTL(10*time.Second))
	if err != nil {
		log.Fatal(err)
	}
}
