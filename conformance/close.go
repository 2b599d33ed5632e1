package conformance

import (
	"errors"
	"testing"
	"time"

	"github.com/distlock/distlock"
)

func testClose(t *testing.T, e *env) {
	a, b := e.locker(t), e.locker(t)
	k1, k2, k3 := e.key("close-1"), e.key("close-2"), e.key("close-3")
	l1 := mustAcquire(t, a, k1)
	l2 := mustAcquire(t, a, k2)
	l3 := mustAcquire(t, b, k3)
	defer release(t, l3)
	waited := make(chan error, 1)
	go func() {
		_, err := a.Acquire(ctxFor(t, 60*time.Second), k3)
		waited <- err
	}()
	e.inLine(t, a, 1, b.d, Mutex, k3, 1)
	if err := a.Close(); err != nil {
		t.Errorf("Close: %v", err)
	}
	select {
	case err := <-waited:
		if !errors.Is(err, distlock.ErrClosed) {
			t.Errorf("a wait interrupted by Close returned %v, want ErrClosed", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Close returned but a wait on the closed Locker is still blocked")
	}
	for _, le := range []*distlock.Lease{l1, l2} {
		select {
		case <-le.Done():
		default:
			t.Errorf("lease on %q still open after Close", le.Key())
		}
		if !errors.Is(le.Err(), distlock.ErrReleased) {
			t.Errorf("lease on %q: Err() = %v after Close, want ErrReleased", le.Key(), le.Err())
		}
		if !isFree(t, b, le.Key()) {
			t.Errorf("key %q still held after Close released it", le.Key())
		}
	}
	if _, err := a.TryAcquire(ctxFor(t, 10*time.Second), e.key("close-4")); !errors.Is(err, distlock.ErrClosed) {
		t.Errorf("TryAcquire after Close = %v, want ErrClosed", err)
	}
	if err := a.Close(); !errors.Is(err, distlock.ErrClosed) {
		t.Errorf("second Close = %v, want ErrClosed", err)
	}
}
