package conformance

import (
	"errors"
	"testing"
	"time"

	"github.com/distlock/distlock/backend"
)

// testUndeclaredKinds: a request of a kind the driver does not declare
// (Capabilities.WaitFor is empty: no semaphore, no read-write lock, in
// this store or this mode) is refused with ErrUnsupported, and takes
// nothing: not the mutex of the same key either (a driver that ignored
// Request.Kind would grant that).
func testUndeclaredKinds(t *testing.T, e *env) {
	d, other := e.driver(t), e.driver(t)
	caps := d.Capabilities()
	var undeclared []backend.Kind
	for _, k := range []backend.Kind{backend.Read, backend.Write, backend.Permits} {
		if caps.WaitFor(k) == "" {
			undeclared = append(undeclared, k)
		}
	}
	if len(undeclared) == 0 {
		t.Skipf("%s declares every kind", caps.Name)
	}
	for _, k := range undeclared {
		key := e.key("undeclared-" + k.String())
		req := e.request(key, "undeclared-owner-0123456789abcd")
		req.Kind, req.Limit, req.Permits = k, 2, 1
		g, err := d.TryAcquire(ctxFor(t, 10*time.Second), req)
		if err == nil {
			_ = g.Lock.Release(ctxFor(t, 10*time.Second))
			t.Errorf("%s declares no %s grants but granted one", caps.Name, k)
			continue
		}
		if !errors.Is(err, backend.ErrUnsupported) {
			t.Errorf("a %s request on %s, which declares none: %v, want an error matching ErrUnsupported", k, caps.Name, err)
		}
		g, err = other.TryAcquire(ctxFor(t, 10*time.Second), e.request(key, "undeclared-other-0123456789abc"))
		if err != nil {
			t.Errorf("after a refused %s request on %q its mutex is not free: %v", k, key, err)
			continue
		}
		_ = g.Lock.Release(ctxFor(t, 10*time.Second))
	}
}
