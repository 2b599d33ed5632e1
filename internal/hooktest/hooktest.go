// Package hooktest checks a backend's conformance harness hooks
// (conformance.Partitioner, conformance.ReplyDropper) at the driver level:
// that they do what they claim to the store, to one driver only, before the
// conformance cases rely on them. It is for the backends' own tests.
package hooktest

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/distlock/distlock/backend"
	"github.com/distlock/distlock/conformance"
)

// Run checks the hooks h implements; it skips those it does not.
//
// Whether a lost reply's request ran is not checked here: drivers clean up
// after a failed call (a failed acquisition gives its hold back), so the
// store's state afterwards does not show it. The proxy's own tests (and
// redislock's TestLostReplyRetried) show that the request runs.
func Run(t *testing.T, h conformance.Harness) {
	t.Cleanup(func() { _ = h.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	a := newDriver(t, ctx, h)
	b := newDriver(t, ctx, h)
	prefix := fmt.Sprintf("hooktest-%d-", time.Now().UnixNano())
	req := func(key string) backend.Request {
		return backend.Request{Key: prefix + key, Owner: "owner-" + key, TTL: h.TTL()}
	}
	t.Run("Partitioner", func(t *testing.T) {
		p, ok := h.(conformance.Partitioner)
		if !ok {
			t.Skip("no Partitioner")
		}
		if err := p.Partition(ctx, a); err != nil {
			t.Fatal(err)
		}
		short, stop := context.WithTimeout(ctx, h.TTL()/2)
		g, err := a.TryAcquire(short, req("cut"))
		stop()
		if err == nil {
			_ = g.Lock.Release(ctx)
			_ = p.Heal(ctx, a)
			t.Fatal("a partitioned driver acquired a lock")
		}
		t.Logf("partitioned: %v", err)
		// The other driver is not cut off.
		gb, err := b.TryAcquire(ctx, req("cut"))
		if err != nil {
			_ = p.Heal(ctx, a)
			t.Fatalf("another driver, not partitioned: %v", err)
		}
		_ = gb.Lock.Release(ctx)
		if err := p.Heal(ctx, a); err != nil {
			t.Fatal(err)
		}
		retry(t, ctx, "after Heal", func(ctx context.Context) error {
			g, err := a.TryAcquire(ctx, req("healed"))
			if err == nil {
				err = g.Lock.Release(ctx)
			}
			return err
		})
	})
	t.Run("ReplyDropper", func(t *testing.T) {
		r, ok := h.(conformance.ReplyDropper)
		if !ok {
			t.Skip("no ReplyDropper")
		}
		before, others := r.Dropped(a), r.Dropped(b)
		if err := r.DropNextReply(ctx, a); err != nil {
			t.Fatal(err)
		}
		g, err := a.TryAcquire(ctx, req("lost"))
		if err == nil {
			t.Logf("the client retried the acquisition into a success")
			_ = g.Lock.Release(ctx)
		} else {
			t.Logf("acquisition with its reply lost: %v", err)
		}
		deadline := time.Now().Add(10 * time.Second)
		for r.Dropped(a) == before && time.Now().Before(deadline) {
			time.Sleep(10 * time.Millisecond)
		}
		if r.Dropped(a) == before {
			t.Fatal("no reply was dropped")
		}
		if r.Dropped(b) != others {
			t.Error("a reply of another driver was dropped")
		}
		retry(t, ctx, "after the lost reply", func(ctx context.Context) error {
			g, err := a.TryAcquire(ctx, req("after"))
			if err == nil {
				err = g.Lock.Release(ctx)
			}
			return err
		})
	})
}

func newDriver(t *testing.T, ctx context.Context, h conformance.Harness) backend.Driver {
	t.Helper()
	d, err := h.NewDriver(ctx)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = d.Close() })
	return d
}

// retry runs f until it succeeds, for at most 30 s.
func retry(t *testing.T, ctx context.Context, what string, f func(context.Context) error) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		c, cancel := context.WithTimeout(ctx, 5*time.Second)
		err := f(c)
		cancel()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: %v", what, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}
