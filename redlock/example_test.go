package redlock_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/distlock/distlock"
	"github.com/distlock/distlock/redlock"
)

// Redlock takes each lock on a majority of independent Redis primaries (not
// replicas of one another), so a minority of them crashing loses no lock,
// provided they persist with appendfsync always (or stay down longer than
// the longest TTL). Its fencing tokens come from a majority too; see
// docs/redis.md for the argument and its limits.
func ExampleNew() {
	var clients []redis.UniversalClient
	for _, addr := range []string{"redis-a:6379", "redis-b:6379", "redis-c:6379"} {
		clients = append(clients, redis.NewClient(&redis.Options{Addr: addr}))
	}
	defer func() {
		for _, c := range clients {
			_ = c.Close()
		}
	}()

	d, err := redlock.New(clients, nil)
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

// A Redlock URL is a redis:// URL with mode=redlock and one host per
// primary; importing this package makes distlock.Open serve it. Every
// mistake in it is reported before anything is dialed.
func Example_url() {
	_, err := distlock.Open(context.Background(), "redis://redis-a,redis-b,redis-c?mode=redlock&wait_replicas=1")
	fmt.Println(errors.Is(err, distlock.ErrInvalidConfig))
	fmt.Println(err)
	// Output:
	// true
	// distlock: open redis://redis-a,redis-b,redis-c?mode=redlock&wait_replicas=1: redlock: invalid configuration: wait_replicas is not supported with mode=redlock
}
