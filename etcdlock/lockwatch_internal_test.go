package etcdlock

import (
	"testing"
	"time"
)

// TestIdleCloseFiresAtOnce: the timer that closes an unused watch may fire
// before time.AfterFunc has returned it (here with no linger; in the fault
// suite, a client stopped with SIGSTOP past the linger). The old code
// handed the timer's function the variable AfterFunc's result was being
// written to: a data race (-race reported it in a fault client).
func TestIdleCloseFiresAtOnce(t *testing.T) {
	old := lockWatchLinger
	lockWatchLinger = 0
	defer func() { lockWatchLinger = old }()
	d := &Driver{}
	for i := range 200 {
		closed := make(chan struct{})
		lw := &lockWatch{d: d, key: "k", subs: map[*lockSub]struct{}{}, cancel: func() { close(closed) }}
		sub := &lockSub{w: lw}
		lw.subs[sub] = struct{}{}
		sub.close()
		select {
		case <-closed:
		case <-time.After(10 * time.Second):
			t.Fatalf("round %d: the unused watch was not closed", i)
		}
	}
}
