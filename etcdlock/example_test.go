package etcdlock_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/distlock/distlock"
	"github.com/distlock/distlock/etcdlock"
)

// Build the driver over a client the program already has. Every lock of
// the driver lives on one etcd lease of TTL Options.TTL. The driver never
// closes the client: close it after the Locker.
func ExampleNew() {
	cli, err := clientv3.New(clientv3.Config{
		Endpoints:   []string{"etcd-1:2379", "etcd-2:2379", "etcd-3:2379"},
		DialTimeout: 5 * time.Second,
	})
	if err != nil {
		log.Fatal(err)
	}
	defer cli.Close()

	d, err := etcdlock.New(cli, &etcdlock.Options{Prefix: "app/locks", TTL: 10 * time.Second})
	if err != nil {
		log.Fatal(err)
	}
	locker := distlock.New(d) // owns d, not cli
	defer locker.Close()

	err = locker.Do(context.Background(), "leader/scheduler", func(ctx context.Context) error {
		fmt.Println("scheduling") // ctx ends if the lock is lost
		return nil
	})
	if err != nil {
		log.Fatal(err)
	}
}

// Make a write to etcd conditional on still holding the lock: OwnerCmp is
// checked by the server in the same transaction as the write, so a holder
// whose lock was lost (its lease expired while it was paused or cut off)
// writes nothing, however late it runs.
func ExampleDriver_OwnerCmp() {
	cli, err := clientv3.New(clientv3.Config{Endpoints: []string{"etcd-1:2379"}, DialTimeout: 5 * time.Second})
	if err != nil {
		log.Fatal(err)
	}
	defer cli.Close()
	d, err := etcdlock.New(cli, nil)
	if err != nil {
		log.Fatal(err)
	}
	locker := distlock.New(d)
	defer locker.Close()

	ctx := context.Background()
	lease, err := locker.Acquire(ctx, "config/publish")
	if err != nil {
		log.Fatal(err)
	}
	defer func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = lease.Release(ctx)
	}()

	owns, err := d.OwnerCmp(lease.Key(), lease.Token())
	if err != nil {
		log.Fatal(err) // matches distlock.ErrNotHeld: the lease already ended
	}
	resp, err := cli.Txn(ctx).If(owns).Then(clientv3.OpPut("/app/config/current", "v42")).Commit()
	if err != nil {
		log.Fatal(err)
	}
	if !resp.Succeeded {
		fmt.Println("lock lost before the write: nothing written")
		return
	}
	fmt.Println("published v42")
}

// etcd leases are no shorter than MinTTL: Open rejects a shorter ttl before
// dialling anything.
func Example_ttlTooShort() {
	_, err := distlock.Open(context.Background(), "etcd://127.0.0.1:2379/locks?ttl=1s")
	fmt.Println(errors.Is(err, distlock.ErrInvalidConfig))
	fmt.Println(err)
	// Output:
	// true
	// distlock: open etcd://127.0.0.1:2379/locks?ttl=1s: etcdlock: parameter ttl: invalid configuration: TTL 1s is below etcd's minimum lease TTL 2s
}
