package memlock_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/distlock/distlock/backend"
	"github.com/distlock/distlock/memlock"
)

// TestStaleReadHandleOfSameOwner: a read hold that expired in the store
// is gone for good: a later read hold of the same owner (another process
// re-entering under the same owner id) is not it. The stale handle's
// Refresh and Release answer ErrNotHeld and leave the new hold alone.
// They used to find "a reader with this owner" and refresh it, or
// release it: the new holder then read with no read lock in the store,
// and a writer was granted the lock beside it.
func TestStaleReadHandleOfSameOwner(t *testing.T) {
	ctx := context.Background()
	store := memlock.NewStore()
	drv := func() *memlock.Driver {
		d, err := store.NewDriver(nil)
		if err != nil {
			t.Fatal(err)
		}
		return d
	}
	a, b, w := drv(), drv(), drv()
	req := backend.Request{Kind: backend.Read, Key: "k", Owner: "same-owner", TTL: 30 * time.Millisecond}
	ga, err := a.TryAcquire(ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	time.Sleep(2 * req.TTL) // a's read hold expires in the store (a was paused)
	req.TTL = time.Minute
	gb, err := b.TryAcquire(ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	if err := ga.Lock.Refresh(ctx, time.Minute); !errors.Is(err, backend.ErrNotHeld) {
		t.Errorf("Refresh of the expired read hold = %v, want ErrNotHeld", err)
	}
	if err := ga.Lock.Release(ctx); !errors.Is(err, backend.ErrNotHeld) {
		t.Errorf("Release of the expired read hold = %v, want ErrNotHeld", err)
	}
	if gw, err := w.TryAcquire(ctx, backend.Request{Kind: backend.Write, Key: "k", Owner: "writer", TTL: time.Minute}); err == nil {
		t.Error("a writer was granted the lock while the second read hold is held")
		_ = gw.Lock.Release(ctx)
	}
	if err := gb.Lock.Release(ctx); err != nil {
		t.Errorf("Release of the live read hold = %v", err)
	}
}
