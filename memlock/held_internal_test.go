package memlock

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/distlock/distlock/backend"
)

// TestHeldForgotten: a driver's held locks (which Partition and Heal report
// to) drop a lock when it is released, also one a Refresh found gone (the
// portable layer releases every Grant): that Release reports ErrNotHeld.
func TestHeldForgotten(t *testing.T) {
	ctx := context.Background()
	d, err := NewStore().NewDriver(nil)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	count := d.held.Len
	g, err := d.TryAcquire(ctx, backend.Request{Key: "released", Owner: "o", TTL: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	if n := count(); n != 1 {
		t.Fatalf("%d held after a grant, want 1", n)
	}
	if err := g.Lock.Release(ctx); err != nil {
		t.Fatal(err)
	}
	if n := count(); n != 0 {
		t.Errorf("%d held after a release, want 0", n)
	}

	g, err = d.TryAcquire(ctx, backend.Request{Key: "expires", Owner: "o", TTL: 20 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	time.Sleep(50 * time.Millisecond)
	if err := g.Lock.Refresh(ctx, time.Minute); !errors.Is(err, backend.ErrNotHeld) {
		t.Fatalf("Refresh of an expired lock: %v, want ErrNotHeld", err)
	}
	if err := g.Lock.Release(ctx); !errors.Is(err, backend.ErrNotHeld) {
		t.Errorf("Release of a lock a Refresh found gone: %v, want ErrNotHeld", err)
	}
	if n := count(); n != 0 {
		t.Errorf("%d held after the release of a lock a Refresh found gone, want 0", n)
	}
}
