package conformance

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/distlock/distlock"
)

func serverControl(t *testing.T, e *env) ServerControl {
	sc := harnessCan[ServerControl](t, e, "the harness cannot stop the server (it does not implement ServerControl)")
	// Whatever happens, the server is running again for the next case.
	t.Cleanup(func() {
		if err := sc.StartServer(ctxFor(t, 2*time.Minute)); err != nil {
			t.Errorf("restarting the server: %v", err)
		}
	})
	return sc
}

func testServerDown(t *testing.T, e *env) {
	sc := serverControl(t, e)
	a := e.locker(t)
	if !isFree(t, a, e.key("warm-up")) {
		t.Fatal("fresh key not free")
	}
	if err := sc.StopServer(ctxFor(t, time.Minute)); err != nil {
		t.Fatalf("StopServer: %v", err)
	}
	bound := 10 * time.Second
	t0 := time.Now()
	le, err := a.TryAcquire(ctxFor(t, bound), e.key("down"))
	if err == nil {
		_ = le.Release(ctxFor(t, time.Second))
		t.Fatal("TryAcquire succeeded with the server down")
	}
	if took := time.Since(t0); took > bound+5*time.Second {
		t.Errorf("TryAcquire with the server down took %v, beyond its ctx's %v", took, bound)
	}
	if !errors.Is(err, distlock.ErrUnavailable) {
		t.Errorf("TryAcquire with the server down = %v, want an error matching ErrUnavailable", err)
	}
	t.Logf("with the server down: %v", err)
	// A store that never answered within the ctx has no error of its own
	// to show; any other failure carries the client's.
	if ne, ok := e.h.(NativeErrors); ok && !errors.Is(err, context.DeadlineExceeded) && !ne.NativeError(err) {
		t.Errorf("the store client's own error is not reachable with errors.As through %v (%T)", err, err)
	}
	if err := sc.StartServer(ctxFor(t, 2*time.Minute)); err != nil {
		t.Fatalf("StartServer: %v", err)
	}
	var lastErr error
	ok := eventually(60*time.Second, func() bool {
		le, lastErr = a.TryAcquire(ctxFor(t, 5*time.Second), e.key("back"))
		return lastErr == nil
	})
	if !ok {
		t.Fatalf("after the server came back, the existing Locker could not acquire: %v", lastErr)
	}
	release(t, le)
	b := e.locker(t)
	release(t, mustAcquire(t, b, e.key("back-new")))
}

func testServerDownBeyondTTL(t *testing.T, e *env) {
	sc := serverControl(t, e)
	a := e.locker(t)
	le := mustAcquire(t, a, e.key("down-held"))
	if err := sc.StopServer(ctxFor(t, time.Minute)); err != nil {
		t.Fatalf("StopServer: %v", err)
	}
	if !waitDone(le, 2*e.ttl+10*time.Second) {
		t.Fatal("lease not reported lost while the server stayed down beyond its TTL")
	}
	if !errors.Is(le.Err(), distlock.ErrLost) {
		t.Errorf("Err() = %v, want ErrLost", le.Err())
	}
}
