package distlock_test

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/distlock/distlock"
	"github.com/distlock/distlock/backend"
	"github.com/distlock/distlock/internal/shim"
	"github.com/distlock/distlock/memlock"
)

// TestForceRelease: the Locker checks its input, refuses a driver that is
// no Inspector (or does not declare ForceRelease), logs who freed what,
// and the freed holder's next renewal ends its lease with ErrLost while
// the next holder gets a greater token.
func TestForceRelease(t *testing.T) {
	ctx := context.Background()
	store := memlock.NewStore()
	d1, _ := store.NewDriver(nil)
	d2, _ := store.NewDriver(nil)
	holder := distlock.New(d1, distlock.WithDefaultTTL(300*time.Millisecond))
	defer holder.Close()
	var logs bytes.Buffer
	op := distlock.New(d2, distlock.WithLogger(slog.New(slog.NewTextHandler(&logs, nil))))
	defer op.Close()

	le, err := holder.Acquire(ctx, "job")
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		key, by string
		want    error
	}{
		{"", "ops", distlock.ErrInvalidKey},
		{"job", "", distlock.ErrInvalidConfig},
		{"free", "ops", distlock.ErrNotHeld},
	} {
		if _, err := op.ForceRelease(ctx, c.key, c.by, "test"); !errors.Is(err, c.want) || strings.Count(err.Error(), "distlock:") != 1 {
			t.Errorf("ForceRelease(%q, by %q) = %v, want %v in one distlock: line", c.key, c.by, err, c.want)
		}
	}
	info, err := op.ForceRelease(ctx, "job", "alice@ops", "stuck deploy")
	if err != nil {
		t.Fatal(err)
	}
	if info.Owner != le.Owner() || info.Token != le.Token() {
		t.Errorf("freed %+v, want owner %q token %d", info, le.Owner(), le.Token())
	}
	line := logs.String()
	for _, want := range []string{"lock forced free", "key=job", "by=alice@ops", `reason="stuck deploy"`, "owner=" + le.Owner()} {
		if !strings.Contains(line, want) {
			t.Errorf("log %q lacks %q", line, want)
		}
	}
	select {
	case <-le.Done():
	case <-time.After(5 * time.Second):
		t.Fatal("the freed holder's lease did not end")
	}
	if !errors.Is(le.Err(), distlock.ErrLost) {
		t.Errorf("freed holder's Err = %v, want ErrLost", le.Err())
	}
	next, err := op.TryAcquire(ctx, "job")
	if err != nil {
		t.Fatal(err)
	}
	if next.Token() <= le.Token() {
		t.Errorf("next token %d not above the freed %d", next.Token(), le.Token())
	}
	st, _ := d2.Inspect(ctx, "job", backend.Exclusive)
	if st.Forced == nil || st.Forced.By != "alice@ops" || st.Forced.Token != le.Token() {
		t.Errorf("Inspect's record = %+v", st.Forced)
	}

	hidden := distlock.New(noInspect{shim.Notifier{Driver: d2}})
	defer hidden.Close()
	if _, err := hidden.ForceRelease(ctx, "job", "ops", ""); !errors.Is(err, distlock.ErrUnsupported) {
		t.Errorf("ForceRelease over a driver without Inspector = %v, want ErrUnsupported", err)
	}
	_ = op.Close()
	if _, err := op.ForceRelease(ctx, "job", "ops", ""); !errors.Is(err, distlock.ErrClosed) {
		t.Errorf("ForceRelease after Close = %v, want ErrClosed", err)
	}
}
