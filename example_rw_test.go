package distlock_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"time"

	"github.com/distlock/distlock"
)

func ExampleRWMutex() {
	ctx := context.Background()
	a, err := distlock.Open(ctx, "mem://rw-example?ttl=10s")
	if err != nil {
		log.Fatal(err)
	}
	defer a.Close()
	b, _ := distlock.Open(ctx, "mem://rw-example?ttl=10s") // another client of the same store
	defer b.Close()

	ma, err := a.RWMutex("config/pricing")
	if err != nil {
		log.Fatal(err) // ErrUnsupported on a store without read-write locks
	}
	mb, _ := b.RWMutex("config/pricing")

	w, err := ma.Lock(ctx) // the writer
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("write token", w.Token())
	if _, err := mb.TryRLock(ctx); errors.Is(err, distlock.ErrNotAcquired) {
		fmt.Println("readers wait while the writer holds it")
	}
	_ = w.Release(ctx)

	r1, _ := ma.RLock(ctx)
	r2, _ := mb.RLock(ctx) // readers share
	fmt.Println("two readers, both reading the write with token", r1.Token(), r2.Token())
	_ = r1.Release(ctx)
	_ = r2.Release(ctx)
	// Output:
	// write token 1
	// readers wait while the writer holds it
	// two readers, both reading the write with token 1 1
}

func ExampleRWMutex_Lock_upgrade() {
	ctx := context.Background()
	locker, err := distlock.Open(ctx, "mem://rw-upgrade")
	if err != nil {
		log.Fatal(err)
	}
	defer locker.Close()
	m, _ := locker.RWMutex("catalog")

	r, err := m.RLock(ctx)
	if err != nil {
		log.Fatal(err)
	}
	// Asking for the write side with the read lease's owner would wait for
	// itself forever: it is refused at once instead.
	tctx, cancel := context.WithTimeout(r.Context(), 5*time.Second)
	defer cancel()
	if _, err := m.Lock(tctx); errors.Is(err, distlock.ErrUpgrade) {
		fmt.Println("upgrade refused: release the read lease first")
	}
	_ = r.Release(ctx)
	w, err := m.Lock(ctx)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("writing with token", w.Token())
	_ = w.Release(ctx)
	// Output:
	// upgrade refused: release the read lease first
	// writing with token 1
}
