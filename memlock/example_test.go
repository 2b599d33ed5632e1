package memlock_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"time"

	"github.com/distlock/distlock"
	"github.com/distlock/distlock/memlock"
)

// In your own tests, give each test a Store of its own, and each simulated
// process a Driver of it. Kill stands in for a crash: the dead process's
// lock stays until its TTL runs out, then the next waiter gets it.
func Example() {
	ctx := context.Background()
	store := memlock.NewStore()
	newLocker := func() (*distlock.Locker, *memlock.Driver) {
		d, err := store.NewDriver(nil)
		if err != nil {
			log.Fatal(err)
		}
		return distlock.New(d, distlock.WithDefaultTTL(100*time.Millisecond)), d
	}
	a, da := newLocker()
	defer a.Close()
	b, _ := newLocker()
	defer b.Close()

	if _, err := a.Acquire(ctx, "report"); err != nil {
		log.Fatal(err)
	}
	_, err := b.TryAcquire(ctx, "report")
	fmt.Println("b while a runs:", errors.Is(err, distlock.ErrNotAcquired))

	da.Kill() // a's process dies without releasing
	wait, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	lease, err := b.Acquire(wait, "report")
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("b after a's TTL: token", lease.Token())
	// Output:
	// b while a runs: true
	// b after a's TTL: token 2
}

// SetAvailable(false) is a store outage: test that your code reports it
// rather than treating it as "someone else holds the lock".
func ExampleStore_SetAvailable() {
	ctx := context.Background()
	store := memlock.NewStore()
	d, err := store.NewDriver(nil)
	if err != nil {
		log.Fatal(err)
	}
	locker := distlock.New(d)
	defer locker.Close()

	store.SetAvailable(false)
	_, err = locker.TryAcquire(ctx, "cron")
	fmt.Println(errors.Is(err, distlock.ErrUnavailable), errors.Is(err, distlock.ErrNotAcquired))

	store.SetAvailable(true)
	lease, err := locker.TryAcquire(ctx, "cron")
	fmt.Println(err)
	_ = lease.Release(ctx)
	// Output:
	// true false
	// <nil>
}

// Delete removes a lock behind its holder's back, as an operator or a
// server restart would. The holder learns at its next renewal; a test can
// make that happen now with Refresh.
func ExampleStore_Delete() {
	ctx := context.Background()
	store := memlock.NewStore()
	d, err := store.NewDriver(nil)
	if err != nil {
		log.Fatal(err)
	}
	locker := distlock.New(d)
	defer locker.Close()

	lease, err := locker.Acquire(ctx, "migrations")
	if err != nil {
		log.Fatal(err)
	}
	store.Delete("migrations")
	err = lease.Refresh(ctx, 0)
	fmt.Println(errors.Is(err, distlock.ErrLost), errors.Is(err, distlock.ErrNotHeld))
	<-lease.Done()
	fmt.Println(lease.State())
	// Output:
	// true true
	// lost
}
