package distlock_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"time"

	"github.com/distlock/distlock"
	_ "github.com/distlock/distlock/memlock" // registers mem://
)

// finish is a helper written once for a Lease, a MultiLease and a
// Leadership: it releases what it is given, with a fresh timeout, and says
// how the grant ended.
func finish(what string, h distlock.Held) {
	before := h.State()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := h.Release(ctx); err != nil {
		log.Print(err)
	}
	<-h.Done()
	fmt.Printf("%s: %v, then %v (released: %v)\n", what, before, h.State(), errors.Is(h.Err(), distlock.ErrReleased))
}

func ExampleHeld() {
	ctx := context.Background()
	locker, err := distlock.Open(ctx, "mem://held")
	if err != nil {
		log.Fatal(err)
	}
	defer locker.Close()

	lease, err := locker.Acquire(ctx, "reports/daily")
	if err != nil {
		log.Fatal(err)
	}
	finish("lease", lease)

	multi, err := locker.AcquireAll(ctx, []string{"accounts/1", "accounts/2"})
	if err != nil {
		log.Fatal(err)
	}
	finish("multi-lease", multi)

	election, err := locker.Election("scheduler")
	if err != nil {
		log.Fatal(err)
	}
	leadership, err := election.Campaign(ctx, "host-a")
	if err != nil {
		log.Fatal(err)
	}
	finish("leadership", leadership)
	// Output:
	// lease: held, then released (released: true)
	// multi-lease: held, then released (released: true)
	// leadership: held, then released (released: true)
}
