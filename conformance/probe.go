package conformance

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
	metricnoop "go.opentelemetry.io/otel/metric/noop"

	"github.com/distlock/distlock"
	"github.com/distlock/distlock/backend"
)

// The cases learn what happened from events, never from sleeps: each
// Locker the suite makes reports to a probe, through its own observer
// hooks (distlock.WithEvents, and a MeterProvider that keeps the two
// instruments the cases need), and the store, where it can, reports how
// many waiters a key has (Inspector.Inspect of the kind, or
// the harness's WaiterCounter).

// probe is what one Locker told the suite about itself.
type probe struct {
	mu      sync.Mutex
	changed chan struct{} // closed and replaced on every change
	waiting int           // calls waiting for a lock or permits now (distlock.acquire.waiters)
	began   int           // calls that began waiting, ever
	failed  int           // renewals that failed without the store saying "not held" (distlock.renewals)
	events  []distlock.Event
}

func newProbe() *probe { return &probe{changed: make(chan struct{})} }

// update applies f under the probe's mutex and wakes whoever waits.
func (p *probe) update(f func()) {
	p.mu.Lock()
	f()
	close(p.changed)
	p.changed = make(chan struct{})
	p.mu.Unlock()
}

// options are the Locker options that make a Locker report to p.
func (p *probe) options() []distlock.LockerOption {
	return []distlock.LockerOption{
		distlock.WithEvents(func(ev distlock.Event) { p.update(func() { p.events = append(p.events, ev) }) }),
		distlock.WithMeterProvider(probeMeters{p: p}),
	}
}

// until waits, for at most d, until cond (called under the probe's mutex)
// holds, re-checking it on every change. It reports whether it did.
func (p *probe) until(d time.Duration, cond func(p *probe) bool) bool {
	timer := time.NewTimer(d)
	defer timer.Stop()
	for {
		p.mu.Lock()
		ok, ch := cond(p), p.changed
		p.mu.Unlock()
		if ok {
			return true
		}
		select {
		case <-ch:
		case <-timer.C:
			return false
		}
	}
}

// state returns the probe's counters.
func (p *probe) state() (waiting, began, failed int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.waiting, p.began, p.failed
}

// saw reports whether an event of kind on key happened after since.
// The probe's mutex is held.
func (p *probe) saw(kind distlock.EventKind, key string, since time.Time) bool {
	for _, ev := range p.events {
		if ev.Kind == kind && ev.Key == key && !ev.Time.Before(since) {
			return true
		}
	}
	return false
}

// probeMeters is a MeterProvider (OpenTelemetry's API, no SDK) whose meter
// keeps distlock.acquire.waiters and the failed distlock.renewals; every
// other instrument is a no-op.
type probeMeters struct {
	metricnoop.MeterProvider
	p *probe
}

func (m probeMeters) Meter(string, ...metric.MeterOption) metric.Meter { return probeMeter{p: m.p} }

type probeMeter struct {
	metricnoop.Meter
	p *probe
}

func (m probeMeter) Int64UpDownCounter(name string, opts ...metric.Int64UpDownCounterOption) (metric.Int64UpDownCounter, error) {
	if name != "distlock.acquire.waiters" {
		return m.Meter.Int64UpDownCounter(name, opts...)
	}
	return waitersCounter{p: m.p}, nil
}

func (m probeMeter) Int64Counter(name string, opts ...metric.Int64CounterOption) (metric.Int64Counter, error) {
	if name != "distlock.renewals" {
		return m.Meter.Int64Counter(name, opts...)
	}
	return renewalsCounter{p: m.p}, nil
}

type waitersCounter struct {
	metricnoop.Int64UpDownCounter
	p *probe
}

func (c waitersCounter) Add(_ context.Context, v int64, _ ...metric.AddOption) {
	c.p.update(func() {
		c.p.waiting += int(v)
		if v > 0 {
			c.p.began += int(v)
		}
	})
}

type renewalsCounter struct {
	metricnoop.Int64Counter
	p *probe
}

func (c renewalsCounter) Add(_ context.Context, v int64, opts ...metric.AddOption) {
	set := metric.NewAddConfig(opts).Attributes()
	outcome, _ := set.Value(attribute.Key("distlock.outcome"))
	if outcome.AsString() != "error" {
		return
	}
	c.p.update(func() { c.p.failed += int(v) })
}

// WaiterCounter is implemented by harnesses that can count the waiters the
// store keeps in line for a key, for stores whose driver cannot report
// them (backend.Info.Waiters, SemaphoreInfo.Waiters and RWInfo.Waiters
// are -1). The order cases (FairOrder, SemaphoreFIFO) start each waiter
// once the store has the one before in line; without a count they start
// it once the one before is waiting in its client, which on a fair store
// is in line only if its first request reached the store by then.
type WaiterCounter interface {
	// Waiters returns how many waiters the store has queued for key's
	// primitive (a lock, a semaphore's permits, a read-write lock), or -1
	// when it cannot tell.
	Waiters(ctx context.Context, kind Primitive, key string) (int, error)
}

// Primitive names what a key locks, for WaiterCounter.
type Primitive string

const (
	Mutex          Primitive = "mutex"
	SemaphoreGrant Primitive = "semaphore"
	RWLock         Primitive = "rw"
)

// waitLimit bounds every wait for an event the suite is sure must come:
// far beyond any bound of the rules, so that only a broken driver (or a
// machine far slower than 3× a CI runner) reaches it.
const waitLimit = 60 * time.Second

// storeWaiters asks the store, through d or the harness, how many waiters
// key's primitive has in line: -1 when it cannot tell.
func (e *env) storeWaiters(t *testing.T, d backend.Driver, kind Primitive, key string) int {
	t.Helper()
	ctx := ctxFor(t, 10*time.Second)
	if wc, ok := e.h.(WaiterCounter); ok {
		n, err := wc.Waiters(ctx, kind, key)
		if err != nil {
			t.Fatalf("harness Waiters(%s %q): %v", kind, key, err)
		}
		if n >= 0 {
			return n
		}
	}
	if !d.Capabilities().Offers(d).Inspect {
		return -1
	}
	in := d.(backend.Inspector)
	k := backend.Exclusive
	switch kind {
	case SemaphoreGrant:
		k = backend.Permits
	case RWLock:
		k = backend.Write
	}
	info, err := in.Inspect(ctx, key, k)
	n := info.Waiters
	if err != nil {
		if errors.Is(err, backend.ErrUnsupported) {
			return -1
		}
		t.Fatalf("inspecting %s %q for its waiters: %v", kind, key, err)
	}
	return n
}

// inLine waits until w has begun waiting calls (at least calls of them,
// counted since w was made) and, where the store can count its waiters
// (asked through d), until the store has at least n in line for key. It
// reports whether the store's count was used. The store's count is
// polled: no store announces a waiter joining its line.
func (e *env) inLine(t *testing.T, w *client, calls int, d backend.Driver, kind Primitive, key string, n int) bool {
	t.Helper()
	if !w.probe.until(waitLimit, func(p *probe) bool { return p.began >= calls }) {
		_, began, _ := w.probe.state()
		t.Fatalf("%d of %d waiting calls on %q began within %v", began, calls, key, waitLimit)
	}
	if e.storeWaiters(t, d, kind, key) < 0 {
		return false
	}
	var got int
	if !eventually(waitLimit, func() bool {
		got = e.storeWaiters(t, d, kind, key)
		return got >= n
	}) {
		t.Fatalf("the store had %d waiters in line for %q %v after the waiting calls began, want %d", got, key, waitLimit, n)
	}
	return true
}

// inOrder starts waiter i of an order case (FairOrder, SemaphoreFIFO)
// once waiter i-1 is in line: counted by the store where it can count
// (see inLine). Where it cannot, the waiter's client saying it waits is
// not enough (a store's line is joined by the waiter's first request,
// which may still be on its way: Redlock's first attempt asks every node
// before it queues on the first), so the next waiter starts gap after
// that: the one time-based step left in the suite, logged, which a
// driver removes by reporting its waiters (Info.Waiters,
// SemaphoreInfo.Waiters) or its harness by implementing WaiterCounter.
func (e *env) inOrder(t *testing.T, w *client, d backend.Driver, kind Primitive, key string, n int, gap time.Duration) {
	t.Helper()
	if e.inLine(t, w, 1, d, kind, key, n) {
		return
	}
	if n == 1 {
		t.Logf("%s cannot count the waiters of its %s: each waiter starts %v after the one before waits in its client (implement Waiters in its inspector, or conformance.WaiterCounter in the harness, to make this exact)", w.Capabilities().Name, kind, gap)
	}
	pause(gap)
}

// heldThroughout checks, for the whole of window, that key stays held:
// another client's TryAcquire fails again and again. A window, not a
// sleep: nothing is awaited; it is the time a late delivery (a retried
// release, a ghost) gets to show.
func heldThroughout(t *testing.T, c *client, key string, window time.Duration, what string) {
	t.Helper()
	end := time.Now().Add(window)
	for {
		if isFree(t, c, key) {
			t.Fatal(what)
		}
		if time.Now().After(end) {
			return
		}
		pause(5 * time.Millisecond)
	}
}

// freeThroughout checks, for the whole of window, that key stays free
// (each check takes and releases it).
func freeThroughout(t *testing.T, c *client, key string, window time.Duration, what string) {
	t.Helper()
	end := time.Now().Add(window)
	for {
		if !isFree(t, c, key) {
			t.Error(what)
			return
		}
		if time.Now().After(end) {
			return
		}
		pause(5 * time.Millisecond)
	}
}

// pause is the interval between two looks at a condition no event
// announces (the store's waiter count, a key's state over a window). It
// synchronises nothing.
func pause(d time.Duration) { time.Sleep(d) }

// work is time spent under a lock, as a holder does work: it widens the
// window in which a second holder would show. It synchronises nothing.
func work(d time.Duration) { time.Sleep(d) }

func (p *probe) String() string {
	w, b, f := p.state()
	return fmt.Sprintf("waiting %d, began %d, failed renewals %d", w, b, f)
}
