package distlock_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/distlock/distlock"
	"github.com/distlock/distlock/backend"
	"github.com/distlock/distlock/internal/shim"
	"github.com/distlock/distlock/memlock"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"
)

// eventLog keeps the events WithEvents delivers.
type eventLog struct {
	mu  sync.Mutex
	evs []distlock.Event
}

func (e *eventLog) add(ev distlock.Event) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.evs = append(e.evs, ev)
}

func (e *eventLog) events() []distlock.Event {
	e.mu.Lock()
	defer e.mu.Unlock()
	return slices.Clone(e.evs)
}

func (e *eventLog) kinds() []distlock.EventKind {
	var ks []distlock.EventKind
	for _, ev := range e.events() {
		ks = append(ks, ev.Kind)
	}
	return ks
}

// waitCount waits up to d for n events of kind.
func (e *eventLog) waitCount(kind distlock.EventKind, n int, d time.Duration) bool {
	for end := time.Now().Add(d); ; time.Sleep(2 * time.Millisecond) {
		got := 0
		for _, k := range e.kinds() {
			if k == kind {
				got++
			}
		}
		if got >= n {
			return true
		}
		if time.Now().After(end) {
			return false
		}
	}
}

// Every acquisition is counted by outcome and mode, with the backend's
// name and without the key; the lease count goes up and down and the
// hold time is recorded at the release.
func TestMetricsAcquisitionOutcomes(t *testing.T) {
	ctx := context.Background()
	mp := newFakeMeterProvider()
	l := newLocker(t, memlock.NewStore(), backend.WaitNotify, distlock.WithMeterProvider(mp))
	le, err := l.TryAcquire(ctx, "a")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := l.TryAcquire(ctx, "a", distlock.WithOwner("someone-else")); !errors.Is(err, distlock.ErrNotAcquired) {
		t.Fatalf("second TryAcquire: %v", err)
	}
	cctx, cancel := context.WithTimeout(ctx, 30*time.Millisecond)
	defer cancel()
	if _, err := l.Acquire(cctx, "a", distlock.WithOwner("someone-else")); err == nil {
		t.Fatal("Acquire of a held lock succeeded")
	}
	if _, err := l.TryAcquire(ctx, ""); !errors.Is(err, distlock.ErrInvalidKey) {
		t.Fatalf("TryAcquire(\"\"): %v", err)
	}
	if err := le.Release(ctx); err != nil {
		t.Fatal(err)
	}

	// The outcomes are counted by the duration histogram: there is no
	// distlock.acquisitions counter any more (it repeated the count).
	m := mp.m
	for _, tc := range []struct {
		want  int
		attrs []string
	}{
		{1, []string{"distlock.outcome", "acquired", "distlock.acquire.mode", "try", "distlock.primitive", "mutex"}},
		{1, []string{"distlock.outcome", "not_acquired", "distlock.acquire.mode", "try"}},
		{1, []string{"distlock.outcome", "canceled", "distlock.acquire.mode", "wait"}},
		{1, []string{"distlock.outcome", "error", "error.type", "invalid_key"}},
		{4, []string{"distlock.backend", "mem"}},
		{4, []string{"distlock.primitive", "mutex"}},
	} {
		if _, n := m.get("distlock.acquire.duration", tc.attrs...); n != tc.want {
			t.Errorf("distlock.acquire.duration %v has %d measurements, want %d", tc.attrs, n, tc.want)
		}
	}
	if _, ok := m.units["distlock.acquisitions"]; ok {
		t.Error("the distlock.acquisitions counter is made; the duration histogram's count replaced it")
	}
	if sum, n := m.get("distlock.lease.count", "distlock.lease.state", "held"); sum != 0 || n != 2 {
		t.Errorf("distlock.lease.count{held}: sum %v over %d changes, want 0 over 2 (+1, -1)", sum, n)
	}
	if _, n := m.get("distlock.lease.duration", "distlock.outcome", "released"); n != 1 {
		t.Errorf("distlock.lease.duration{released} has %d measurements, want 1", n)
	}
	if sum, n := m.get("distlock.acquire.waiters"); sum != 0 || n != 2 {
		t.Errorf("distlock.acquire.waiters: sum %v over %d changes, want 0 over 2", sum, n)
	}
	for _, s := range m.sets() {
		if _, ok := s.Value("distlock.key"); ok {
			t.Errorf("a key was recorded without WithKeyAttribute: %v", s.Encoded(nil))
		}
	}
	for name, unit := range map[string]string{"distlock.acquire.duration": "s", "distlock.lease.count": "{lease}"} {
		if m.units[name] != unit {
			t.Errorf("%s has unit %q, want %q", name, m.units[name], unit)
		}
	}
}

// A lease's doubt, restoration and loss are events (in order, with the
// lease's key, owner and token) and counted; the callback runs without the
// Locker's lock (it calls State, which takes it).
func TestDoubtEventsAndMetrics(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		mp := newFakeMeterProvider()
		var log eventLog
		var cur atomic.Pointer[distlock.Lease]
		d, _ := memlock.NewStore().NewDriver(nil)
		l := distlock.New(d, distlock.WithMeterProvider(mp), distlock.WithEvents(func(ev distlock.Event) {
			if le := cur.Load(); le != nil {
				_ = le.State() // takes the Locker's lock: deadlocks if called under it
			}
			log.add(ev)
		}))
		defer l.Close()
		le, err := l.Acquire(ctx, "k", distlock.WithTTL(2*time.Second))
		if err != nil {
			t.Fatal(err)
		}
		cur.Store(le)
		d.Partition(0)
		if !log.waitCount(distlock.EventInDoubt, 1, time.Second) {
			t.Fatalf("no in-doubt event after a partition; events %v", log.kinds())
		}
		if sum, _ := mp.m.get("distlock.lease.count", "distlock.lease.state", "in_doubt"); sum != 1 {
			t.Errorf("distlock.lease.count{in_doubt} = %v while in doubt, want 1", sum)
		}
		d.Heal()
		if !log.waitCount(distlock.EventRestored, 1, time.Second) {
			t.Fatalf("no restored event after the heal; events %v", log.kinds())
		}
		d.Partition(300 * time.Millisecond)
		defer d.Heal()
		if !log.waitCount(distlock.EventLost, 1, 2*time.Second) {
			t.Fatalf("no lost event; events %v", log.kinds())
		}

		want := []distlock.EventKind{distlock.EventAcquired, distlock.EventInDoubt, distlock.EventRestored, distlock.EventInDoubt, distlock.EventLost}
		if got := log.kinds(); !slices.Equal(got, want) {
			t.Fatalf("events %v, want %v", got, want)
		}
		for _, ev := range log.events() {
			if ev.Key != "k" || ev.Owner != le.Owner() || ev.Token != le.Token() || ev.Time.IsZero() {
				t.Errorf("%v event: key %q owner %q token %d time %v, want the lease's", ev.Kind, ev.Key, ev.Owner, ev.Token, ev.Time)
			}
			switch ev.Kind {
			case distlock.EventInDoubt:
				if ev.Cause == nil || ev.Deadline.IsZero() {
					t.Errorf("in-doubt event with cause %v and deadline %v, want both", ev.Cause, ev.Deadline)
				}
			case distlock.EventLost:
				if !errors.Is(ev.Cause, distlock.ErrLost) || !ev.Deadline.IsZero() {
					t.Errorf("lost event with cause %v and deadline %v, want ErrLost and none", ev.Cause, ev.Deadline)
				}
			}
		}
		m := mp.m
		for name, want := range map[string]float64{"distlock.lease.in_doubt": 2, "distlock.lease.restored": 1, "distlock.lease.count": 0} {
			if got, _ := m.get(name); got != want {
				t.Errorf("%s = %v, want %v", name, got, want)
			}
		}
		if got, _ := m.get("distlock.lease.lost", "distlock.lost.reason", "expired"); got != 1 {
			t.Errorf("distlock.lease.lost{expired} = %v, want 1", got)
		}
		if _, n := m.get("distlock.lease.duration", "distlock.outcome", "lost"); n != 1 {
			t.Errorf("distlock.lease.duration{lost} has %d measurements, want 1", n)
		}
		if failed, _ := m.get("distlock.renewals", "distlock.outcome", "error"); failed == 0 {
			t.Error("no failed renewal counted during a partition")
		}
		if got, _ := m.get("distlock.store.errors", "distlock.operation", "refresh", "error.type", "unavailable"); got == 0 {
			t.Error("no store error counted for the refreshes a partition failed")
		}
	})
}

// Close returns after the released events of the leases it ended are
// delivered, each with a cause matching ErrClosed; a Release the store
// confirmed has none.
func TestCloseDeliversEvents(t *testing.T) {
	ctx := context.Background()
	var log eventLog
	d, _ := memlock.NewStore().NewDriver(nil)
	l := distlock.New(d, distlock.WithEvents(log.add))
	le, err := l.Acquire(ctx, "released")
	if err != nil {
		t.Fatal(err)
	}
	_ = le.Release(ctx)
	for _, k := range []string{"a", "b", "c"} {
		if _, err := l.Acquire(ctx, k); err != nil {
			t.Fatal(err)
		}
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	closed := 0
	for _, ev := range log.events() {
		switch {
		case ev.Kind != distlock.EventReleased:
		case ev.Key == "released":
			if ev.Cause != nil {
				t.Errorf("released event of a Release with cause %v, want nil", ev.Cause)
			}
		case errors.Is(ev.Cause, distlock.ErrClosed):
			closed++
		default:
			t.Errorf("released event of %q at Close with cause %v, want ErrClosed", ev.Key, ev.Cause)
		}
	}
	if closed != 3 {
		t.Errorf("%d released events by the time Close returned, want 3; events %v", closed, log.kinds())
	}
}

// WithKeyAttribute records the key's label on the metrics about one lock,
// and nothing where the label is empty.
func TestKeyAttribute(t *testing.T) {
	ctx := context.Background()
	mp := newFakeMeterProvider()
	label := func(key string) string {
		if prefix, _, ok := strings.Cut(key, "/"); ok {
			return prefix
		}
		return ""
	}
	l := newLocker(t, memlock.NewStore(), "", distlock.WithMeterProvider(mp), distlock.WithKeyAttribute(label))
	for _, k := range []string{"invoices/1", "invoices/2", "bare"} {
		le, err := l.TryAcquire(ctx, k)
		if err != nil {
			t.Fatal(err)
		}
		_ = le.Release(ctx)
	}
	if _, n := mp.m.get("distlock.acquire.duration", "distlock.key", "invoices"); n != 2 {
		t.Errorf("distlock.acquire.duration{key=invoices} has %d measurements, want 2", n)
	}
	if _, n := mp.m.get("distlock.lease.duration", "distlock.key", "invoices"); n != 2 {
		t.Errorf("distlock.lease.duration{key=invoices} has %d measurements, want 2", n)
	}
	if _, n := mp.m.get("distlock.acquire.duration"); n != 3 {
		t.Errorf("distlock.acquire.duration has %d measurements, want 3", n)
	}
}

// Acquire, TryAcquire and Release make spans that are children of the
// caller's span; the Lease's context keeps the caller's span current.
func TestSpans(t *testing.T) {
	ctx := context.Background()
	tp := newFakeTracerProvider(true)
	l := newLocker(t, memlock.NewStore(), "", distlock.WithTracerProvider(tp))
	ctx, req := tp.t.Start(ctx, "request")
	le, err := l.Acquire(ctx, "k")
	if err != nil {
		t.Fatal(err)
	}
	acq := tp.t.named("distlock.Acquire")
	if len(acq) != 1 {
		t.Fatalf("%d Acquire spans, want 1", len(acq))
	}
	a := acq[0]
	if a.parent.SpanID() != req.SpanContext().SpanID() {
		t.Error("the Acquire span is not a child of the caller's span")
	}
	for k, want := range map[string]string{"distlock.backend": "mem", "distlock.outcome": "acquired", "distlock.token": fmt.Sprint(le.Token()), "distlock.key": ""} {
		if got := a.attr(k); got != want {
			t.Errorf("Acquire span %s = %q, want %q", k, got, want)
		}
	}
	if a.attr("distlock.acquire.wait") == "" {
		t.Error("Acquire span has no wait time")
	}
	if st, ended := a.state(); st != codes.Unset || !ended {
		t.Errorf("Acquire span status %v, ended %v: want unset, ended", st, ended)
	}
	if got := trace.SpanFromContext(le.Context()).SpanContext().SpanID(); got != req.SpanContext().SpanID() {
		t.Error("the Lease's context does not carry the caller's span")
	}
	if err := le.Release(ctx); err != nil {
		t.Fatal(err)
	}
	rel := tp.t.named("distlock.Release")
	if len(rel) != 1 || rel[0].parent.SpanID() != req.SpanContext().SpanID() || rel[0].attr("distlock.release.freed") != "true" {
		t.Errorf("Release spans %v: want one, a child of the caller's span, that freed the lock", rel)
	}

	held, _ := l.TryAcquire(ctx, "k", distlock.WithOwner("holder"))
	defer held.Release(ctx)
	_, _ = l.TryAcquire(ctx, "k")
	_, _ = l.TryAcquire(ctx, "")
	try := tp.t.named("distlock.TryAcquire")
	if len(try) != 3 {
		t.Fatalf("%d TryAcquire spans, want 3", len(try))
	}
	if st, _ := try[1].state(); st != codes.Unset || try[1].attr("distlock.outcome") != "not_acquired" {
		t.Errorf("not acquired: span status %v, outcome %q; want unset (an answer, not a failure), not_acquired", st, try[1].attr("distlock.outcome"))
	}
	if st, _ := try[2].state(); st != codes.Error || try[2].attr("error.type") != "invalid_key" {
		t.Errorf("invalid key: span status %v, error.type %q; want Error, invalid_key", st, try[2].attr("error.type"))
	}
}

// A lease's doubt is a span from its start to its restoration, and a loss
// without doubt an instant span with an error status; both start traces
// of their own, linked to the acquisition's span.
func TestLeaseSpans(t *testing.T) {
	ctx := context.Background()
	tp := newFakeTracerProvider(true)
	d, _ := memlock.NewStore().NewDriver(nil)
	l := distlock.New(d, distlock.WithTracerProvider(tp))
	defer l.Close()
	le, err := l.Acquire(ctx, "k", distlock.WithTTL(2*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	d.Partition(0)
	d.Heal()
	if !waitState(le, distlock.StateHeld, time.Second) {
		t.Fatalf("State() = %v after the heal", le.State())
	}
	doubt := waitSpan(t, tp.t, "distlock.lease.doubt")
	acq := tp.t.named("distlock.Acquire")[0]
	if doubt.parent.IsValid() || len(doubt.links) != 1 || doubt.links[0].SpanContext.SpanID() != acq.sc.SpanID() {
		t.Errorf("doubt span: parent %v, links %v; want a new root linked to the Acquire span", doubt.parent, doubt.links)
	}
	if got := doubt.attr("distlock.outcome"); got != "restored" {
		t.Errorf("doubt span outcome %q, want restored", got)
	}

	short, err := l.Acquire(ctx, "short", distlock.WithTTL(100*time.Millisecond), distlock.WithoutAutoRenew())
	if err != nil {
		t.Fatal(err)
	}
	<-short.Done()
	lost := waitSpan(t, tp.t, "distlock.lease.lost")
	if st, _ := lost.state(); st != codes.Error || lost.attr("distlock.lost.reason") != "expired" || lost.parent.IsValid() {
		t.Errorf("lost span: status %v, reason %q, parent %v; want Error, expired, a new root", st, lost.attr("distlock.lost.reason"), lost.parent)
	}
	_ = le.Release(ctx)
}

// waitSpan waits for the first span called name to end.
func waitSpan(t *testing.T, tr *fakeTracer, name string) *fakeSpan {
	t.Helper()
	for end := time.Now().Add(time.Second); time.Now().Before(end); time.Sleep(2 * time.Millisecond) {
		if s := tr.named(name); len(s) > 0 {
			if _, ended := s[0].state(); ended {
				return s[0]
			}
		}
	}
	t.Fatalf("no %s span ended within a second", name)
	return nil
}

// A renewal that goes unanswered for a sixth of the TTL puts the lease in
// doubt, with an event, as State reports it; its late success restores it.
func TestUnansweredRenewalEvent(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		inner, _ := memlock.NewStore().NewDriver(nil)
		d := &hookDriver{Notifier: shim.Notifier{Driver: inner}, gate: make(chan struct{}), refreshed: make(chan struct{}, 1)}
		var log eventLog
		l := distlock.New(d, distlock.WithEvents(log.add))
		defer l.Close()
		le, err := l.Acquire(ctx, "k", distlock.WithTTL(1500*time.Millisecond))
		if err != nil {
			t.Fatal(err)
		}
		select {
		case <-d.refreshed: // the renewal is in flight, held at the gate
		case <-time.After(2 * time.Second):
			t.Fatalf("no renewal within 2s of a 1.5s TTL; events %v, State() %v", log.kinds(), le.State())
		}
		if !log.waitCount(distlock.EventInDoubt, 1, time.Second) {
			t.Fatalf("no in-doubt event for an unanswered renewal; events %v, State() %v", log.kinds(), le.State())
		}
		if ev := log.events()[1]; !errors.Is(ev.Cause, distlock.ErrUnavailable) || !strings.Contains(ev.Cause.Error(), "unanswered") {
			t.Errorf("in-doubt cause %v, want an unanswered renewal matching ErrUnavailable", ev.Cause)
		}
		if st := le.State(); st != distlock.StateInDoubt {
			t.Errorf("State() = %v with an in-doubt event delivered", st)
		}
		close(d.gate)
		if !log.waitCount(distlock.EventRestored, 1, time.Second) {
			t.Fatalf("no restored event once the renewal was answered; events %v", log.kinds())
		}
		_ = le.Release(ctx)
	})
}
