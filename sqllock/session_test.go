package sqllock_test

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/distlock/distlock"
	"github.com/distlock/distlock/backend"
	"github.com/distlock/distlock/sqllock"
)

// TestSessionManyLeases: in session mode one Driver holds many leases
// over its Sessions shared connections (no connection per lease), keeps
// them all through renewal rounds, declares batch refresh, and refuses
// the kinds it does not build (semaphores, read-write locks) with
// ErrUnsupported.
func TestSessionManyLeases(t *testing.T) {
	d := dialectRow(pgSession)
	s := d.server(t)
	const n, ttl = 300, 2 * time.Second
	dr, c := d.newDriver(t, s, sqllock.Options{Sessions: 2})
	caps := dr.Capabilities()
	if !caps.Offers(dr).BatchRefresh || caps.Semaphore != "" || caps.RW != "" {
		t.Errorf("Capabilities = %+v, want batch refresh, no semaphore, no rw", caps)
	}
	l := distlock.New(dr, distlock.WithDefaultTTL(ttl))
	t.Cleanup(func() { _ = l.Close() })
	ctx := ctxFor(t, time.Minute)
	var leases []*distlock.Lease
	base := uniqueKey("many")
	for i := range n {
		le, err := l.TryAcquire(ctx, fmt.Sprintf("%s-%d", base, i))
		if err != nil {
			t.Fatalf("lease %d: %v", i, err)
		}
		leases = append(leases, le)
	}
	if st := c.db.Stats(); st.InUse > 2 {
		t.Errorf("%d leases held over %d connections in use, want at most Sessions (2)", n, st.InUse)
	}
	// Three renewal rounds (at TTL/3): none is lost.
	// A lease lost ends its Done; none may within 1.5 TTL.
	select {
	case <-leases[0].Done():
	case <-leases[n-1].Done():
	case <-time.After(ttl + ttl/2):
	}
	for _, le := range leases {
		if err := le.Err(); err != nil {
			t.Fatalf("lease %s after renewal rounds: %v", le.Key(), err)
		}
	}
	if st := c.db.Stats(); st.InUse > 2 {
		t.Errorf("after renewals: %d connections in use, want at most 2", st.InUse)
	}
	for _, le := range leases {
		if err := le.Release(ctx); err != nil {
			t.Errorf("release %s: %v", le.Key(), err)
		}
	}
	_, err := dr.TryAcquire(ctx, backend.Request{Kind: backend.Permits, Key: uniqueKey("sem"), Owner: "owner-sem-0123456789abcdef", Limit: 2, Permits: 1, TTL: ttl})
	if !errors.Is(err, backend.ErrUnsupported) {
		t.Errorf("a semaphore in session mode: %v, want ErrUnsupported", err)
	}
}
