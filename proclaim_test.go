package distlock_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/distlock/distlock"
	"github.com/distlock/distlock/backend"
	"github.com/distlock/distlock/internal/shim"
	"github.com/distlock/distlock/memlock"
)

// countInspect is memlock's driver with its Inspect calls counted (every
// other method, its Announcer too, promoted as it is).
type countInspect struct {
	*memlock.Driver
	n atomic.Int32
}

func (d *countInspect) Inspect(ctx context.Context, key string, kind backend.Kind) (backend.Info, error) {
	d.n.Add(1)
	return d.Driver.Inspect(ctx, key, kind)
}

// next receives the next report from ch, failing if the channel closes or
// nothing comes before the bubble's clock has moved on by within.
func next(t *testing.T, ch <-chan distlock.LeaderInfo, within time.Duration) distlock.LeaderInfo {
	t.Helper()
	select {
	case li, ok := <-ch:
		if !ok {
			t.Fatal("Observe's channel closed")
		}
		return li
	case <-time.After(within):
		t.Fatalf("Observe reported nothing within %v", within)
	}
	return distlock.LeaderInfo{}
}

// TestProclaim: a leader's Proclaim reaches an observer that would poll
// only once an hour (the store's watch pushed it), Leader and the
// Leadership report the value, and neither the term nor the owner change.
func TestProclaim(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := memlock.NewStore()
		a := distlock.New(must(s.NewDriver(nil)))
		od := &countInspect{Driver: must(s.NewDriver(nil))}
		o := distlock.New(od)
		defer a.Close()
		defer o.Close()
		ea := must(a.Election("e"))
		eo := must(o.Election("e", distlock.WithObserveInterval(time.Hour)))
		ctx := context.Background()
		ch := must(eo.Observe(ctx))
		if got := next(t, ch, time.Second); got.Leading {
			t.Fatalf("first report %+v, want nobody leading", got)
		}
		ld := must(ea.Campaign(ctx, "alpha"))
		if got := next(t, ch, time.Second); got.Value != "alpha" || got.Term != ld.Term() {
			t.Fatalf("report %+v after alpha was elected with term %d", got, ld.Term())
		}
		term, owner := ld.Term(), ld.Owner()
		if err := ld.Proclaim(ctx, "alpha-v2"); err != nil {
			t.Fatalf("Proclaim: %v", err)
		}
		got := next(t, ch, time.Second)
		if !got.Leading || got.Value != "alpha-v2" || got.Term != term || got.Owner != owner {
			t.Errorf("report after Proclaim = %+v, want value alpha-v2, term %d, owner %s", got, term, owner)
		}
		if ld.Value() != "alpha-v2" || ld.Term() != term || ld.Owner() != owner {
			t.Errorf("Leadership after Proclaim: value %q term %d owner %q", ld.Value(), ld.Term(), ld.Owner())
		}
		if info, err := eo.Leader(ctx); err != nil || info.Value != "alpha-v2" || info.Term != term {
			t.Errorf("Leader() after Proclaim = %+v, %v", info, err)
		}
		if err := ld.Resign(ctx); err != nil {
			t.Fatal(err)
		}
		if got := next(t, ch, time.Second); got.Leading {
			t.Errorf("report after Resign = %+v, want nobody leading", got)
		}
		// A new term starts without the proclaimed value.
		ld2 := must(ea.Campaign(ctx, "bravo"))
		if got := next(t, ch, time.Second); got.Value != "bravo" || got.Term <= term {
			t.Errorf("report for the next term = %+v, want bravo above term %d", got, term)
		}
		_ = ld2.Resign(ctx)
		next(t, ch, time.Second)
		// Watching, an observer of an election nobody leads reads nothing
		// more, however long it waits.
		synctest.Wait()
		before := od.n.Load()
		time.Sleep(10 * time.Minute)
		synctest.Wait()
		if n := od.n.Load() - before; n != 0 {
			t.Errorf("%d reads in 10 minutes with nobody leading, want 0 (the watch pushes)", n)
		}
	})
}

// TestObserveWatchSeesExpiry: a leader whose client died expires by its
// TTL, which memlock (like Redis) does not announce; the observer reads
// again when that TTL runs out, not an hour later.
func TestObserveWatchSeesExpiry(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := memlock.NewStore()
		ad := must(s.NewDriver(nil))
		a := distlock.New(ad)
		o := distlock.New(must(s.NewDriver(nil)))
		defer a.Close()
		defer o.Close()
		ea := must(a.Election("e", distlock.WithLeaderTTL(2*time.Second)))
		eo := must(o.Election("e", distlock.WithObserveInterval(time.Hour)))
		ctx := context.Background()
		ch := must(eo.Observe(ctx))
		next(t, ch, time.Second)
		ld := must(ea.Campaign(ctx, "alpha"))
		next(t, ch, time.Second)
		ad.Kill()
		start := time.Now()
		if got := next(t, ch, 10*time.Second); got.Leading {
			t.Errorf("report after the leader's client died = %+v, want nobody leading", got)
		}
		if took := time.Since(start); took > 2*time.Second {
			t.Errorf("the expiry was reported %v after the client died, want within the TTL 2s", took)
		}
		<-ld.Done()
	})
}

// TestObserveWatchDown: while the observer's watch is down (its client
// partitioned) Observe polls at its interval; once it is back, pushes
// again.
func TestObserveWatchDown(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := memlock.NewStore()
		a := distlock.New(must(s.NewDriver(nil)))
		od := must(s.NewDriver(nil))
		o := distlock.New(od)
		defer a.Close()
		defer o.Close()
		ea := must(a.Election("e"))
		eo := must(o.Election("e", distlock.WithObserveInterval(time.Minute)))
		ctx := context.Background()
		ch := must(eo.Observe(ctx))
		next(t, ch, time.Second)
		od.Partition(0)
		synctest.Wait() // the watch ended; the observer polls
		ld := must(ea.Campaign(ctx, "alpha"))
		od.Heal()
		start := time.Now()
		got := next(t, ch, 2*time.Minute)
		if took := time.Since(start); got.Value != "alpha" || took > time.Minute {
			t.Errorf("after the watch came back: %+v after %v, want alpha within the interval", got, took)
		}
		if err := ld.Proclaim(ctx, "alpha-v2"); err != nil {
			t.Fatal(err)
		}
		if got := next(t, ch, time.Second); got.Value != "alpha-v2" {
			t.Errorf("after Proclaim, with the watch back: %+v", got)
		}
	})
}

// TestProclaimDeposed: a leader whose lock was deleted in the store, and
// taken by another candidate, cannot change its successor's value: its
// Proclaim fails with ErrLost and ErrNotHeld (the store's owner check,
// before its own renewal noticed), and its leadership ends.
func TestProclaimDeposed(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := memlock.NewStore()
		a := distlock.New(must(s.NewDriver(nil)))
		b := distlock.New(must(s.NewDriver(nil)))
		defer a.Close()
		defer b.Close()
		ctx := context.Background()
		la := must(must(a.Election("e")).Campaign(ctx, "alpha"))
		s.Delete("e")
		lb := must(must(b.Election("e")).Campaign(ctx, "bravo"))
		if la.Err() != nil {
			t.Fatalf("the deposed leader knew before its Proclaim: %v", la.Err())
		}
		err := la.Proclaim(ctx, "stale")
		if !errors.Is(err, distlock.ErrLost) || !errors.Is(err, distlock.ErrNotHeld) {
			t.Errorf("deposed leader's Proclaim = %v, want ErrLost and ErrNotHeld", err)
		}
		if !errors.Is(la.Err(), distlock.ErrLost) {
			t.Errorf("after its refused Proclaim the deposed leadership's Err = %v, want ErrLost", la.Err())
		}
		info, err := must(b.Election("e")).Leader(ctx)
		if err != nil || info.Value != "bravo" || info.Term != lb.Term() {
			t.Errorf("Leader() = %+v, %v; want bravo's term %d untouched", info, err, lb.Term())
		}
		if err := la.Proclaim(ctx, "stale"); !errors.Is(err, distlock.ErrLost) {
			t.Errorf("Proclaim of a lost leadership = %v, want ErrLost", err)
		}
		_ = lb.Resign(ctx)
		if err := lb.Proclaim(ctx, "late"); !errors.Is(err, distlock.ErrReleased) {
			t.Errorf("Proclaim after Resign = %v, want ErrReleased", err)
		}
	})
}

// TestProclaimRefused: a bad value is refused naming it, and a backend
// without values answers ErrUnsupported naming what it lacks.
func TestProclaimRefused(t *testing.T) {
	ctx := context.Background()
	l := distlock.New(must(memlock.NewStore().NewDriver(nil)))
	defer l.Close()
	ld := must(must(l.Election("e")).Campaign(ctx, "alpha"))
	for _, v := range []string{"", "has space", "caf\u00e9"} {
		if err := ld.Proclaim(ctx, v); !errors.Is(err, distlock.ErrInvalidConfig) {
			t.Errorf("Proclaim(%q) = %v, want ErrInvalidConfig", v, err)
		}
	}
	if ld.Value() != "alpha" {
		t.Errorf("a refused Proclaim changed the value to %q", ld.Value())
	}
	p := distlock.New(noInspect{shim.Notifier{Driver: must(memlock.NewStore().NewDriver(nil))}})
	defer p.Close()
	lp := must(must(p.Election("e")).Campaign(ctx, "alpha"))
	if err := lp.Proclaim(ctx, "beta"); !errors.Is(err, distlock.ErrUnsupported) {
		t.Errorf("Proclaim without an Announcer = %v, want ErrUnsupported", err)
	}
}
