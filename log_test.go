package distlock_test

import (
	"context"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/distlock/distlock"
	"github.com/distlock/distlock/backend"
	"github.com/distlock/distlock/memlock"
)

// recorder is a slog.Handler keeping every record.
type recorder struct {
	mu   sync.Mutex
	recs []slog.Record
}

func (r *recorder) Enabled(context.Context, slog.Level) bool { return true }
func (r *recorder) Handle(_ context.Context, rec slog.Record) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.recs = append(r.recs, rec.Clone())
	return nil
}
func (r *recorder) WithAttrs([]slog.Attr) slog.Handler { return r }
func (r *recorder) WithGroup(string) slog.Handler      { return r }

func (r *recorder) atLeast(l slog.Level) []slog.Record {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []slog.Record
	for _, rec := range r.recs {
		if rec.Level >= l {
			out = append(out, rec)
		}
	}
	return out
}

// A lease in doubt logs one line at WARN when it goes into doubt (however
// many renewals fail meanwhile) and one when it is held again, each with
// the key, the owner and the token.
func TestDoubtLoggedOnce(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rec := &recorder{}
		d, err := memlock.NewStore().NewDriver(&memlock.Options{Wait: backend.WaitPoll})
		if err != nil {
			t.Fatal(err)
		}
		l := distlock.New(d, distlock.WithLogger(slog.New(rec)), distlock.WithDefaultTTL(600*time.Millisecond))
		defer l.Close()
		le, err := l.TryAcquire(context.Background(), "jobs/nightly")
		if err != nil {
			t.Fatal(err)
		}
		d.Partition(0)
		time.Sleep(350 * time.Millisecond) // several renewals fail
		d.Heal()
		for end := time.Now().Add(2 * time.Second); le.State() != distlock.StateHeld && time.Now().Before(end); {
			time.Sleep(10 * time.Millisecond)
		}
		if le.State() != distlock.StateHeld {
			t.Fatalf("lease state %v after the heal", le.State())
		}
		lines := rec.atLeast(slog.LevelInfo)
		var doubt, back int
		for _, r := range lines {
			switch {
			case strings.Contains(r.Message, "in doubt"):
				doubt++
				if r.Level != slog.LevelWarn {
					t.Errorf("%q logged at %v, want WARN", r.Message, r.Level)
				}
			case strings.Contains(r.Message, "held again"):
				back++
			}
			attrs := map[string]bool{}
			r.Attrs(func(a slog.Attr) bool { attrs[a.Key] = true; return true })
			for _, k := range []string{"key", "owner", "token"} {
				if !attrs[k] {
					t.Errorf("%q has no %s", r.Message, k)
				}
			}
		}
		if doubt != 1 || back != 1 || len(lines) != 2 {
			var msgs []string
			for _, r := range lines {
				msgs = append(msgs, r.Level.String()+" "+r.Message)
			}
			t.Errorf("logged %d lines at INFO or above (%d in doubt, %d held again), want one of each:\n%s", len(lines), doubt, back, strings.Join(msgs, "\n"))
		}
	})
}
