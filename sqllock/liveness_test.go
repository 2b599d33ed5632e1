package sqllock_test

import (
	"errors"
	"testing"
	"time"

	"github.com/distlock/distlock/backend"
	"github.com/distlock/distlock/sqllock"
)

// TestIdleTimeout: at the driver level (no watchdog), a lock whose holder
// sends nothing for its TTL is freed by the server; a Refresh to a longer
// TTL moves that bound; and the silent holder's next Refresh reports
// ErrNotHeld and calls OnLost.
func TestIdleTimeout(t *testing.T) {
	s := startServer(t)
	d, _ := newDriver(t, s, sqllock.Options{})
	other, _ := newDriver(t, s, sqllock.Options{})
	key := uniqueKey("idle")
	lost := make(chan error, 1)
	req := backend.Request{Key: key, Owner: "owner-idle-0123456789abcd", TTL: time.Second,
		OnLost: func(err error) { lost <- err }}
	g, err := d.TryAcquire(ctxFor(t, 10*time.Second), req)
	if err != nil {
		t.Fatal(err)
	}
	try := func() error {
		g2, err := other.TryAcquire(ctxFor(t, 10*time.Second), backend.Request{Key: key, Owner: "owner-other-0123456789ab", TTL: time.Second})
		if err == nil {
			_ = g2.Lock.Release(ctxFor(t, 10*time.Second))
		}
		return err
	}

	// A longer TTL: silent for 2 s, still held under a 3 s idle timeout.
	if err := g.Lock.Refresh(ctxFor(t, 10*time.Second), 3*time.Second); err != nil {
		t.Fatalf("Refresh to 3s: %v", err)
	}
	time.Sleep(2 * time.Second)
	if err := try(); !errors.Is(err, backend.ErrNotAcquired) {
		t.Fatalf("after 2s of silence under a 3s TTL, another driver's TryAcquire = %v, want ErrNotAcquired", err)
	}
	if err := g.Lock.Refresh(ctxFor(t, 10*time.Second), 3*time.Second); err != nil {
		t.Fatalf("Refresh within the TTL: %v", err)
	}

	// Silent beyond the TTL: the server ends the session and frees the row.
	silent := time.Now()
	var freed time.Duration
	deadline := silent.Add(10 * time.Second)
	for time.Now().Before(deadline) {
		time.Sleep(100 * time.Millisecond)
		if err := try(); err == nil {
			freed = time.Since(silent)
			break
		}
	}
	if freed == 0 {
		t.Fatal("a holder silent for 10s under a 3s TTL still holds the lock")
	}
	t.Logf("silent holder freed by the server %v after its last command (TTL 3s)", freed)
	if freed < 3*time.Second-100*time.Millisecond {
		t.Errorf("the server freed the lock after %v of silence, before the 3s TTL", freed)
	}
	if err := g.Lock.Refresh(ctxFor(t, 10*time.Second), 3*time.Second); !errors.Is(err, backend.ErrNotHeld) {
		t.Errorf("Refresh of the timed-out lock = %v, want ErrNotHeld", err)
	}
	select {
	case err := <-lost:
		t.Logf("OnLost: %v", err)
	default:
		t.Error("OnLost was not called")
	}
}

// TestCloseAbandons: Close frees the locks still held at once, by closing
// their connections.
func TestCloseAbandons(t *testing.T) {
	s := startServer(t)
	d, _ := newDriver(t, s, sqllock.Options{})
	other, _ := newDriver(t, s, sqllock.Options{})
	key := uniqueKey("abandon")
	if _, err := d.TryAcquire(ctxFor(t, 10*time.Second), backend.Request{Key: key, Owner: "owner-a-0123456789abcdef", TTL: 30 * time.Second}); err != nil {
		t.Fatal(err)
	}
	if err := d.Close(); err != nil {
		t.Fatal(err)
	}
	g, err := other.Wait(ctxFor(t, 10*time.Second), backend.Request{Key: key, Owner: "owner-b-0123456789abcdef", TTL: 30 * time.Second})
	if err != nil {
		t.Fatalf("the abandoned lock was not freed: %v", err)
	}
	_ = g.Lock.Release(ctxFor(t, 10*time.Second))
}
