package redlock

import (
	"testing"
	"time"

	"github.com/distlock/distlock/backend"
	"github.com/distlock/distlock/internal/redisproto"
	"github.com/distlock/distlock/sandbox"
)

// TestRedlockTokenNeverBackwards: a stale hold of an owner left on a
// minority of nodes (its other nodes expired or lost it) must not make a
// later acquisition by that owner reuse the stale token: a holder in
// between received a greater one, and tokens must strictly increase.
func TestRedlockTokenNeverBackwards(t *testing.T) {
	g := sandbox.StartT(t, sandbox.Spec{Kind: sandbox.Redis, Nodes: 3})
	ctx := testCtx(t, time.Minute)
	r, clients := nodeDriver(t, g)
	const key, ttl = "stale-minority", 30 * time.Second
	req := func(owner string) backend.Request { return backend.Request{Key: key, Owner: owner, TTL: ttl} }

	a1, err := r.TryAcquire(ctx, req("owner-a"))
	if err != nil {
		t.Fatal(err)
	}
	grantedEverywhere(t, ctx, clients, redisproto.KeysFor(DefaultPrefix, key).Lock)
	// owner-a's hold lapses on nodes 1 and 2 and stays on node 0.
	for _, c := range clients[1:] {
		if err := c.Del(ctx, redisproto.KeysFor(DefaultPrefix, key).Lock).Err(); err != nil {
			t.Fatal(err)
		}
	}
	b, err := r.TryAcquire(ctx, req("owner-b"))
	if err != nil {
		t.Fatalf("owner-b on the majority owner-a no longer holds: %v", err)
	}
	if b.Token <= a1.Token {
		t.Fatalf("owner-b got token %d after owner-a's %d", b.Token, a1.Token)
	}
	if err := b.Lock.Release(ctx); err != nil {
		t.Fatal(err)
	}
	a2, err := r.TryAcquire(ctx, req("owner-a"))
	if err != nil {
		t.Fatal(err)
	}
	defer a2.Lock.Release(ctx)
	if a2.Token <= b.Token {
		t.Errorf("owner-a's new hold got token %d, not above owner-b's %d (owner-a's stale hold on one node had %d)", a2.Token, b.Token, a1.Token)
	}
}
