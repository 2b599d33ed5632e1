package distlock

import (
	"context"
	"testing"
	"testing/synctest"
	"time"

	"github.com/distlock/distlock/memlock"
)

// TestWatchdogSleepsThroughShortLeases: leases acquired and released one
// after another, each well within a third of its TTL, need no renewal, so
// the watchdog goroutine must not be woken for each of them. A wake-up per
// acquisition costs a thread hand-off on the acquiring path (a Redis pair
// took ~35 µs more through a Locker than through its driver alone, on 2
// cores). The loop looks at the queue when the first lease arrives and at
// most a few times after; before the fix it did so for every acquisition
// (the queue was empty when it looked, so it slept an hour, and the next
// acquisition, due sooner, woke it again).
func TestWatchdogSleepsThroughShortLeases(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		d, err := memlock.NewStore().NewDriver(nil)
		if err != nil {
			t.Fatal(err)
		}
		l := New(d)
		defer l.Close()
		ctx := context.Background()
		const pairs = 50
		for range pairs {
			le, err := l.Acquire(ctx, "short", WithTTL(time.Minute))
			if err != nil {
				t.Fatal(err)
			}
			if err := le.Release(ctx); err != nil {
				t.Fatal(err)
			}
			synctest.Wait() // a woken loop has run
		}
		l.mu.Lock()
		wakes := l.wd.wakes
		l.mu.Unlock()
		if wakes > 3 {
			t.Errorf("the watchdog looked at its queue %d times for %d short leases, want at most 3", wakes, pairs)
		}
	})
}
