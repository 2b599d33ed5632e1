package distlock_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/distlock/distlock"
	"github.com/distlock/distlock/memlock"
)

// TestHeldEnds: a Lease, a MultiLease and a Leadership answer the Held
// surface alike once released (State released, Err and a second Release
// matching ErrReleased, the second saying so) and once lost (State lost,
// Err and Release matching ErrLost); a Leadership's Release resigns, so
// the Election may campaign again at once.
func TestHeldEnds(t *testing.T) {
	ctx := t.Context()
	store := memlock.NewStore()
	l := newLocker(t, store, "")
	election, err := l.Election("held-election")
	if err != nil {
		t.Fatal(err)
	}
	grants := []struct {
		name string
		key  string // the key whose deletion loses it
		take func() (distlock.Held, error)
	}{
		{"lease", "held-lease", func() (distlock.Held, error) { return l.Acquire(ctx, "held-lease") }},
		{"multi-lease", "held-b", func() (distlock.Held, error) { return l.AcquireAll(ctx, []string{"held-a", "held-b"}) }},
		{"leadership", "held-election", func() (distlock.Held, error) { return election.Campaign(ctx, "candidate") }},
	}
	for _, g := range grants {
		t.Run(g.name+"/released", func(t *testing.T) {
			h, err := g.take()
			if err != nil {
				t.Fatal(err)
			}
			if s := h.State(); s != distlock.StateHeld {
				t.Fatalf("State %v before Release, want held", s)
			}
			if err := h.Release(ctx); err != nil {
				t.Fatal(err)
			}
			<-h.Done()
			if s := h.State(); s != distlock.StateReleased {
				t.Errorf("State %v after Release, want released", s)
			}
			if !errors.Is(h.Err(), distlock.ErrReleased) || !errors.Is(context.Cause(h.Context()), distlock.ErrReleased) {
				t.Errorf("Err %v, cause %v: want both to match ErrReleased", h.Err(), context.Cause(h.Context()))
			}
			err = h.Release(ctx)
			if !errors.Is(err, distlock.ErrReleased) || !strings.Contains(err.Error(), "already released") {
				t.Errorf("second Release: %v, want ErrReleased and \"already released\"", err)
			}
		})
		t.Run(g.name+"/lost", func(t *testing.T) {
			h, err := g.take()
			if err != nil {
				t.Fatal(err)
			}
			store.Delete(g.key)
			rctx, cancel := context.WithTimeout(ctx, 5*time.Second)
			defer cancel()
			if err := h.Refresh(rctx, 0); !errors.Is(err, distlock.ErrLost) {
				t.Fatalf("Refresh after the store deleted %s: %v, want ErrLost", g.key, err)
			}
			select {
			case <-h.Done():
			case <-rctx.Done():
				t.Fatal("Done not closed after the loss")
			}
			if s := h.State(); s != distlock.StateLost {
				t.Errorf("State %v after the loss, want lost", s)
			}
			if err := h.Release(ctx); !errors.Is(err, distlock.ErrLost) || errors.Is(err, distlock.ErrReleased) {
				t.Errorf("Release of a lost grant: %v, want its Err (ErrLost)", err)
			}
		})
	}
}
