package distlock_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"os"
	"time"

	"github.com/distlock/distlock"
	"github.com/distlock/distlock/memlock" // also registers mem://
)

func Example() {
	ctx := context.Background()
	locker, err := distlock.Open(ctx, "mem://example?ttl=10s")
	if err != nil {
		log.Fatal(err)
	}
	defer locker.Close()

	lease, err := locker.Acquire(ctx, "invoices/2026-11")
	if err != nil {
		log.Fatal(err)
	}
	defer func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if err := lease.Release(ctx); err != nil {
			log.Print(err)
		}
	}()
	fmt.Println("holding", lease.Key(), "with token", lease.Token())
	// Output: holding invoices/2026-11 with token 1
}

func ExampleLocker_Do() {
	ctx := context.Background()
	locker, err := distlock.Open(ctx, "mem://do")
	if err != nil {
		log.Fatal(err)
	}
	defer locker.Close()

	err = locker.Do(ctx, "nightly-report", func(ctx context.Context) error {
		// ctx is canceled if the lock is lost while this runs.
		fmt.Println("generating the report")
		return nil
	}, distlock.WithTTL(30*time.Second))
	if err != nil {
		log.Fatal(err)
	}
	// Output: generating the report
}

func ExampleLocker_TryAcquire() {
	ctx := context.Background()
	a, _ := distlock.Open(ctx, "mem://try")
	b, _ := distlock.Open(ctx, "mem://try") // another client of the same store
	defer a.Close()
	defer b.Close()

	held, err := a.TryAcquire(ctx, "cron")
	if err != nil {
		log.Fatal(err)
	}
	_, err = b.TryAcquire(ctx, "cron")
	fmt.Println(errors.Is(err, distlock.ErrNotAcquired))
	_ = held.Release(ctx)
	// Output: true
}

func ExampleLease_Token() {
	ctx := context.Background()
	locker, _ := distlock.Open(ctx, "mem://fencing")
	defer locker.Close()

	// A protected resource remembers the largest token it has accepted and
	// the owner that wrote with it, and accepts a write only with a greater
	// token, or the same token from the same owner (one lease writes many
	// times): a holder whose lease was lost (paused by GC, partitioned)
	// cannot overwrite its successor's work, even on a store that can hand
	// the same token to two holders (Redis failover; see docs/safety.md).
	var storage struct {
		lastToken uint64
		lastOwner string
	}
	write := func(le *distlock.Lease) error {
		if le.Token() < storage.lastToken || (le.Token() == storage.lastToken && le.Owner() != storage.lastOwner) {
			return fmt.Errorf("stale token %d (last %d)", le.Token(), storage.lastToken)
		}
		storage.lastToken, storage.lastOwner = le.Token(), le.Owner()
		return nil
	}

	first, _ := locker.Acquire(ctx, "file")
	_ = first.Release(ctx)
	second, _ := locker.Acquire(ctx, "file")
	defer second.Release(ctx)

	fmt.Println(write(second))
	fmt.Println(write(second)) // the holder writes again
	fmt.Println(write(first))  // the old holder, too late
	// Output:
	// <nil>
	// <nil>
	// stale token 1 (last 2)
}

func ExampleLease_Context() {
	ctx := context.Background()
	locker, _ := distlock.Open(ctx, "mem://reentry")
	defer locker.Close()

	outer, _ := locker.Acquire(ctx, "account/42")
	// Code called with the lease's context re-enters the same lock instead of
	// waiting for itself.
	inner, err := locker.Acquire(outer.Context(), "account/42")
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(inner.Token() == outer.Token())
	_ = inner.Release(ctx)
	_ = outer.Release(ctx) // the lock is freed here
	// Output: true
}

// Take the URL from the environment, so one binary locks through Redis (or
// any registered backend) in production and in memory in tests and local
// runs. Import the driver packages the URLs may name. (The variable is the
// application's own: the distlock command reads DISTLOCK_URL.)
func ExampleOpen() {
	url := os.Getenv("BILLING_LOCK_URL") // e.g. redis://:secret@locks.internal:6379/0?ttl=15s
	if url == "" {
		url = "mem://?ttl=15s"
	}
	// ctx bounds the connection attempt, not the Locker's life.
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	locker, err := distlock.Open(ctx, url)
	if err != nil {
		log.Fatal(err) // the error never shows the password
	}
	defer locker.Close()

	err = locker.Do(ctx, "cleanup", func(ctx context.Context) error {
		fmt.Println("cleaning up")
		return nil
	})
	if err != nil {
		log.Fatal(err)
	}
	// Output: cleaning up
}

// A lease whose store cannot be reached is in doubt: work that must not
// run without the lock pauses, and resumes once a check sent after contact
// came back succeeds. If contact does not come back before the lease's
// validity runs out, the lease is lost: Done closes and Err says why.
// memlock's Partition and Heal stand in for the network here.
func ExampleLease_State() {
	ctx := context.Background()
	d, err := memlock.NewStore().NewDriver(nil)
	if err != nil {
		log.Fatal(err)
	}
	locker := distlock.New(d) // the Locker owns d and closes it
	defer locker.Close()

	lease, err := locker.Acquire(ctx, "payments/settle", distlock.WithTTL(2*time.Second))
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(lease.State())

	d.Partition(0) // the store is out of reach
	fmt.Println(lease.State())

	d.Heal()
	if err := lease.Refresh(ctx, 0); err != nil { // the watchdog would do it too, a little later
		log.Fatal(err)
	}
	fmt.Println(lease.State())

	d.Partition(200 * time.Millisecond) // this time for good
	<-lease.Done()
	fmt.Println(lease.State(), errors.Is(lease.Err(), distlock.ErrLost))
	// Output:
	// held
	// in doubt
	// held
	// lost true
}

// The ctx Do passes to its function is canceled the moment the lease is
// lost: long work checks it between steps and stops, since another process
// may hold the lock by then. Do's error then matches ErrLost.
func ExampleLocker_Do_lost() {
	d, err := memlock.NewStore().NewDriver(nil)
	if err != nil {
		log.Fatal(err)
	}
	locker := distlock.New(d)
	defer locker.Close()

	err = locker.Do(context.Background(), "reindex", func(ctx context.Context) error {
		d.Partition(100 * time.Millisecond) // the network fails mid-job
		for {
			select {
			case <-ctx.Done():
				fmt.Println("stopped: lock lost")
				return context.Cause(ctx)
			case <-time.After(10 * time.Millisecond): // one step of the work
			}
		}
	}, distlock.WithTTL(2*time.Second))
	fmt.Println(errors.Is(err, distlock.ErrLost))
	// Output:
	// stopped: lock lost
	// true
}

// React to a lease's state changes as they happen, instead of polling
// State: each change arrives once, in order, as an Event.
func ExampleWithEvents() {
	ctx := context.Background()
	// The callback runs on the Locker's event goroutine: it only hands the
	// event on, and the work (pausing, paging, stepping down) happens here.
	events := make(chan distlock.Event, 16)
	locker, err := distlock.Open(ctx, "mem://events", distlock.WithEvents(func(ev distlock.Event) {
		events <- ev
	}))
	if err != nil {
		log.Fatal(err)
	}
	defer locker.Close()

	lease, err := locker.Acquire(ctx, "leader")
	if err != nil {
		log.Fatal(err)
	}
	store := locker.Driver().(*memlock.Driver)
	store.Partition(0) // cut off from the store: the lease is in doubt
	for ev := range events {
		fmt.Println(ev.Kind, ev.Key, ev.Token)
		switch ev.Kind {
		case distlock.EventInDoubt:
			// Pause the work that needs the lock until it is restored.
			store.Heal()
		case distlock.EventRestored:
			_ = lease.Release(ctx)
		case distlock.EventLost, distlock.EventReleased:
			return
		}
	}
	// Output:
	// acquired leader 1
	// in_doubt leader 1
	// restored leader 1
	// released leader 1
}

func ExampleElection() {
	ctx := context.Background()
	a, _ := distlock.Open(ctx, "mem://election") // two candidates, e.g. two replicas
	b, _ := distlock.Open(ctx, "mem://election")
	defer a.Close()
	defer b.Close()

	ea, err := a.Election("scheduler")
	if err != nil {
		log.Fatal(err)
	}
	eb, _ := b.Election("scheduler")

	leader, err := ea.Campaign(ctx, "replica-a:8080") // blocks until elected
	if err != nil {
		log.Fatal(err)
	}
	info, _ := eb.Leader(ctx)
	fmt.Println("leader:", info.Value, "term:", info.Term)

	elected := make(chan *distlock.Leadership)
	go func() {
		ld, err := eb.Campaign(ctx, "replica-b:8080") // waits: a leads
		if err != nil {
			log.Fatal(err)
		}
		elected <- ld
	}()
	// Work under leader.Context(): it is canceled if the leadership is
	// lost. Stamp writes with leader.Term() so a deposed leader is refused.
	if err := leader.Resign(ctx); err != nil {
		log.Fatal(err)
	}
	next := <-elected
	fmt.Println("leader:", next.Value(), "term:", next.Term())
	_ = next.Resign(ctx)
	// Output:
	// leader: replica-a:8080 term: 1
	// leader: replica-b:8080 term: 2
}

func ExampleLeadership_Proclaim() {
	ctx := context.Background()
	a, _ := distlock.Open(ctx, "mem://proclaim") // the leader
	o, _ := distlock.Open(ctx, "mem://proclaim") // an observer, e.g. a router
	defer a.Close()
	defer o.Close()

	ea, _ := a.Election("primary")
	eo, _ := o.Election("primary")
	ch, err := eo.Observe(ctx) // pushed by the store where it watches (mem does)
	if err != nil {
		log.Fatal(err)
	}
	<-ch // nobody leads yet

	leader, err := ea.Campaign(ctx, "10.0.0.1:5432")
	if err != nil {
		log.Fatal(err)
	}
	info := <-ch
	fmt.Println("leader:", info.Value, "term:", info.Term)

	// The leader moves to another address without leaving office: the
	// term, the fencing token, stays; only the current leader can do it.
	if err := leader.Proclaim(ctx, "10.0.0.1:6432"); err != nil {
		log.Fatal(err)
	}
	info = <-ch
	fmt.Println("leader:", info.Value, "term:", info.Term)
	_ = leader.Resign(ctx)
	// Output:
	// leader: 10.0.0.1:5432 term: 1
	// leader: 10.0.0.1:6432 term: 1
}

func ExampleLocker_AcquireAll() {
	ctx := context.Background()
	locker, err := distlock.Open(ctx, "mem://multi")
	if err != nil {
		log.Fatal(err)
	}
	defer locker.Close()

	// Every key or none; taken in one global order, so two transfers
	// over the same accounts never deadlock whatever order they name them.
	m, err := locker.AcquireAll(ctx, []string{"account/bob", "account/alice"})
	if err != nil {
		log.Fatal(err)
	}
	defer func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = m.Release(ctx)
	}()
	fmt.Println("holding", m.Keys())
	// mem takes them in one store step (Redis on one server and etcd too):
	// one round trip, and no one sees a part of the set held.
	fmt.Println("one store step:", locker.Capabilities().MultiAtomic)
	// m.Context() is canceled if any key is lost.

	other, _ := distlock.Open(ctx, "mem://multi")
	defer other.Close()
	_, err = other.TryAcquireAll(ctx, []string{"account/carol", "account/alice"})
	fmt.Println("another client:", errors.Is(err, distlock.ErrNotAcquired))
	// Output:
	// holding [account/alice account/bob]
	// one store step: true
	// another client: true
}
