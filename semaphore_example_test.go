package distlock_test

import (
	"context"
	"errors"
	"fmt"
	"log"

	"github.com/distlock/distlock"
)

// At most 2 holders of the semaphore "encoders" at once, on every Locker
// of the store: here one permit, then two as one lease.
func ExampleSemaphore() {
	ctx := context.Background()
	locker, err := distlock.Open(ctx, "mem://semaphore?ttl=10s")
	if err != nil {
		log.Fatal(err)
	}
	defer locker.Close()

	sem, err := locker.Semaphore("encoders", 2)
	if err != nil {
		log.Fatal(err)
	}
	one, err := sem.Acquire(ctx) // waits while both permits are held
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("holding", one.Permits(), "permit of", sem.Limit(), "with token", one.Token())

	if _, err := sem.TryAcquireN(ctx, 2); errors.Is(err, distlock.ErrNotAcquired) {
		fmt.Println("two more: not now")
	}
	if err := one.Release(ctx); err != nil {
		log.Fatal(err)
	}
	both, err := sem.TryAcquireN(ctx, 2)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("holding", both.Permits(), "permits with token", both.Token())
	if err := both.Release(ctx); err != nil {
		log.Fatal(err)
	}
	// Output:
	// holding 1 permit of 2 with token 1
	// two more: not now
	// holding 2 permits with token 2
}

// Do runs a function while holding one permit, and releases it after.
func ExampleSemaphore_Do() {
	ctx := context.Background()
	locker, err := distlock.Open(ctx, "mem://semaphore-do")
	if err != nil {
		log.Fatal(err)
	}
	defer locker.Close()

	sem, err := locker.Semaphore("crawlers", 8)
	if err != nil {
		log.Fatal(err)
	}
	err = sem.Do(ctx, func(ctx context.Context) error {
		// ctx is canceled if the permit is lost while this runs.
		fmt.Println("crawling with one of", sem.Limit(), "permits")
		return nil
	})
	if err != nil {
		log.Fatal(err)
	}
	// Output: crawling with one of 8 permits
}
