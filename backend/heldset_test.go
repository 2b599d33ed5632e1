package backend_test

import (
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/distlock/distlock/backend"
)

// recorder is one lock's hooks, recording what the set told it.
type recorder struct {
	mu     sync.Mutex
	events []string
	until  time.Time
	lost   error
}

func (r *recorder) hooks() backend.Hooks {
	return backend.Hooks{
		OnLost: func(err error) { r.add("lost"); r.mu.Lock(); r.lost = err; r.mu.Unlock() },
		OnDoubt: func(_ error, until time.Time) {
			r.add("doubt")
			r.mu.Lock()
			r.until = until
			r.mu.Unlock()
		},
		OnRestored: func() { r.add("restored") },
	}
}

func (r *recorder) add(e string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.events = append(r.events, e)
}

func (r *recorder) got() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return fmt.Sprint(r.events)
}

func TestHeldSetPushes(t *testing.T) {
	var s backend.HeldSet[int]
	a, b, c := &recorder{}, &recorder{}, &recorder{}
	if err := s.Track(1, a.hooks()); err != nil {
		t.Fatal(err)
	}
	if err := s.Track(2, b.hooks()); err != nil {
		t.Fatal(err)
	}
	if s.Restored() {
		t.Error("Restored in contact reported a change")
	}
	until := time.Now().Add(time.Minute)
	s.Doubt(errors.New("cut"), until)
	if !s.InDoubt() {
		t.Error("not in doubt after Doubt")
	}
	if err := s.Track(3, c.hooks()); err != nil {
		t.Fatal(err)
	}
	if got := c.got(); got != "[doubt]" || !c.until.Equal(until) {
		t.Errorf("a lock tracked in doubt got %s until %v, want [doubt] until %v", got, c.until, until)
	}
	s.Untrack(2)
	if !s.Restored() {
		t.Error("Restored after Doubt reported no change")
	}
	if s.InDoubt() {
		t.Error("in doubt after Restored")
	}
	if got := a.got(); got != "[doubt restored]" {
		t.Errorf("lock 1 got %s", got)
	}
	if got := b.got(); got != "[doubt]" {
		t.Errorf("untracked lock 2 got %s, want nothing after its Untrack", got)
	}
	if got := c.got(); got != "[doubt restored]" {
		t.Errorf("lock 3 got %s", got)
	}
	if n := s.Len(); n != 2 {
		t.Errorf("Len = %d, want 2", n)
	}
	s.Untrack(42) // not tracked: harmless
}

func TestHeldSetLost(t *testing.T) {
	var s backend.HeldSet[string]
	a, b := &recorder{}, &recorder{}
	_ = s.Track("a", a.hooks())
	_ = s.Track("b", b.hooks())
	s.Untrack("b")
	cause := fmt.Errorf("session expired: %w", backend.ErrLost)
	locks := s.Lost(cause)
	if len(locks) != 1 || locks[0] != "a" {
		t.Errorf("Lost returned %v, want [a]", locks)
	}
	if got := a.got(); got != "[lost]" || !errors.Is(a.lost, cause) {
		t.Errorf("lock a got %s (%v), want [lost] with the cause", got, a.lost)
	}
	if got := b.got(); got != "[]" {
		t.Errorf("untracked lock b got %s", got)
	}
	if s.Len() != 0 {
		t.Errorf("Len = %d after Lost, want 0", s.Len())
	}
	if locks := s.Lost(errors.New("again")); locks != nil {
		t.Errorf("a second Lost returned %v", locks)
	}
	if got := a.got(); got != "[lost]" {
		t.Errorf("a second Lost pushed again: %s", got)
	}
	c := &recorder{}
	if err := s.Track("c", c.hooks()); !errors.Is(err, backend.ErrLost) {
		t.Errorf("Track after Lost = %v, want the cause (ErrLost)", err)
	}
	s.Doubt(errors.New("cut"), time.Time{})
	if s.Restored() || s.Len() != 0 || c.got() != "[]" {
		t.Error("an ended set accepted a lock or pushed")
	}
}

func TestHeldSetEnd(t *testing.T) {
	var s backend.HeldSet[int]
	a := &recorder{}
	_ = s.Track(1, a.hooks())
	if locks := s.End(backend.ErrClosed); len(locks) != 1 || locks[0] != 1 {
		t.Errorf("End returned %v, want [1]", locks)
	}
	if got := a.got(); got != "[]" {
		t.Errorf("End called a hook: %s", got)
	}
	if err := s.Track(2, a.hooks()); !errors.Is(err, backend.ErrClosed) {
		t.Errorf("Track after End = %v, want ErrClosed", err)
	}
	if locks := s.Lost(backend.ErrLost); locks != nil || a.got() != "[]" {
		t.Errorf("Lost after End returned %v and pushed %s", locks, a.got())
	}
}

func TestHeldSetNilHooks(t *testing.T) {
	var s backend.HeldSet[int]
	_ = s.Track(1, backend.Request{}.Hooks())
	s.Doubt(nil, time.Time{})
	s.Restored()
	if locks := s.Lost(nil); len(locks) != 1 {
		t.Errorf("Lost returned %v", locks)
	}
}

// TestHeldSetConcurrent: tracks, untracks and pushes from many goroutines
// (run with -race). Pushes reach each lock in order: after the last
// Restored, no lock still tracked is left in doubt.
func TestHeldSetConcurrent(t *testing.T) {
	var s backend.HeldSet[int]
	const n = 200
	recs := make([]*recorder, n)
	var wg sync.WaitGroup
	for i := range n {
		recs[i] = &recorder{}
		wg.Go(func() {
			_ = s.Track(i, recs[i].hooks())
			if i%3 == 0 {
				s.Untrack(i)
			}
		})
	}
	for range 20 {
		wg.Go(func() {
			s.Doubt(errors.New("cut"), time.Time{})
			s.Restored()
		})
	}
	wg.Wait()
	s.Doubt(errors.New("cut"), time.Time{})
	s.Restored()
	for i, r := range recs {
		r.mu.Lock()
		ev := r.events
		last := ""
		if len(ev) > 0 {
			last = ev[len(ev)-1]
		}
		r.mu.Unlock()
		if i%3 != 0 && last != "restored" {
			t.Errorf("lock %d still tracked, last told %q after the final Restored: %v", i, last, ev)
		}
	}
	if got, want := s.Len(), n-(n+2)/3; got != want {
		t.Errorf("Len = %d, want %d", got, want)
	}
}
