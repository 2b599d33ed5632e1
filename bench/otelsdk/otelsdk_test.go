// Package otelsdk checks the library's telemetry with the real
// OpenTelemetry SDK (which the library's go.mod never requires): names,
// the instrumentation scope's version, bucket boundaries, attributes and
// span parenting, against a Redis server of the sandbox.
package otelsdk

import (
	"context"
	"runtime/debug"
	"strconv"
	"strings"
	"testing"
	"time"

	"go.opentelemetry.io/otel/attribute"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/distlock/distlock"
	_ "github.com/distlock/distlock/redislock"
	"github.com/distlock/distlock/sandbox"
)

const scope = "github.com/distlock/distlock"

// libraryVersion is the library's version as the go command recorded it
// in this binary, what the scope must carry: "devel" when it recorded
// none (a test binary records no dependencies; the library is required
// as v0.0.0 and replaced by the checkout).
func libraryVersion(t *testing.T) string {
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		t.Fatal("no build info")
	}
	for _, m := range bi.Deps {
		if m.Path == scope && m.Version != "" && m.Version != "(devel)" {
			return m.Version
		}
	}
	return "devel"
}

func TestTelemetryWithSDK(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a Redis server")
	}
	t.Setenv("DISTLOCK_SANDBOX", "local")
	g := sandbox.StartT(t, sandbox.Spec{Kind: sandbox.Redis})
	host, port, _ := strings.Cut(strings.TrimPrefix(g.URL(), "redis://"), ":")
	port, _, _ = strings.Cut(port, "/")
	wantPort, _ := strconv.Atoi(port)

	spans := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(spans))
	defer tp.Shutdown(context.Background())
	reader := sdkmetric.NewManualReader()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	defer mp.Shutdown(context.Background())

	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	l, err := distlock.Open(ctx, g.URL(), distlock.WithTracerProvider(tp), distlock.WithMeterProvider(mp))
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	must := func(le interface{ Release(context.Context) error }, err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
		if err := le.Release(ctx); err != nil {
			t.Fatal(err)
		}
	}
	must(l.TryAcquire(ctx, "otel/mutex"))
	sem, _ := l.Semaphore("otel/sem", 2)
	must(sem.Acquire(ctx))
	rw, _ := l.RWMutex("otel/rw")
	must(rw.RLock(ctx))
	must(rw.Lock(ctx))
	el, _ := l.Election("otel/election")
	must(el.Campaign(ctx, "me"))
	must(l.TryAcquireAll(ctx, []string{"otel/a", "otel/b", "otel/c"}))

	// Metrics: the scope and its version, the histogram's buckets and
	// attributes, and no distlock.acquisitions counter.
	var rm metricdata.ResourceMetrics
	if err := reader.Collect(ctx, &rm); err != nil {
		t.Fatal(err)
	}
	version := libraryVersion(t)
	var hist, held *metricdata.Histogram[float64]
	for _, sm := range rm.ScopeMetrics {
		if sm.Scope.Name != scope {
			continue
		}
		if sm.Scope.Version != version || version == "" {
			t.Errorf("meter scope version %q, want the library's %q", sm.Scope.Version, version)
		}
		for _, m := range sm.Metrics {
			if m.Name == "distlock.acquisitions" {
				t.Error("distlock.acquisitions is still recorded")
			}
			if h, ok := m.Data.(metricdata.Histogram[float64]); ok && m.Name == "distlock.acquire.duration" {
				hist = &h
			}
			if h, ok := m.Data.(metricdata.Histogram[float64]); ok && m.Name == "distlock.lease.duration" {
				held = &h
			}
		}
	}
	if hist == nil {
		t.Fatal("no distlock.acquire.duration histogram in the library's scope")
	}
	prims := map[string]uint64{}
	for _, dp := range hist.DataPoints {
		if b := dp.Bounds; len(b) == 0 || b[0] > 0.0001 || countBelow(b, 0.001) < 4 {
			t.Errorf("buckets %v: want the first at 100 µs at most and 4 or more below 1 ms", b)
		}
		checkServer(t, "distlock.acquire.duration", dp.Attributes, host, wantPort)
		p, _ := dp.Attributes.Value("distlock.primitive")
		prims[p.AsString()] += dp.Count
	}
	checkPrimitiveCounts(t, "distlock.acquire.duration", prims)

	// The lease metrics carry the primitive the lock was taken as.
	if held == nil {
		t.Fatal("no distlock.lease.duration histogram")
	}
	heldPrims := map[string]uint64{}
	for _, dp := range held.DataPoints {
		checkServer(t, "distlock.lease.duration", dp.Attributes, host, wantPort)
		p, _ := dp.Attributes.Value("distlock.primitive")
		heldPrims[p.AsString()] += dp.Count
	}
	checkPrimitiveCounts(t, "distlock.lease.duration", heldPrims)

	// Spans: the scope and its version, the primitive and the server on
	// each acquisition, and TryAcquireAll's keys under its own span.
	var multi sdktrace.ReadOnlySpan
	got := spans.GetSpans().Snapshots()
	for _, s := range got {
		if s.Name() == "distlock.TryAcquireAll" {
			multi = s
		}
	}
	if multi == nil {
		t.Fatalf("no distlock.TryAcquireAll span among %d", len(got))
	}
	members, seen := 0, map[string]bool{}
	for _, s := range got {
		if s.InstrumentationScope().Name != scope || s.InstrumentationScope().Version != version {
			t.Errorf("span %s: scope %+v, want %s %s", s.Name(), s.InstrumentationScope(), scope, version)
		}
		attrs := attribute.NewSet(s.Attributes()...)
		if s.Name() == "distlock.Release" {
			if p, _ := attrs.Value("distlock.primitive"); p.AsString() == "" {
				t.Errorf("a Release span has no distlock.primitive")
			}
		}
		if s.Name() != "distlock.TryAcquire" && s.Name() != "distlock.Acquire" {
			continue
		}
		checkServer(t, s.Name(), attrs, host, wantPort)
		p, _ := attrs.Value("distlock.primitive")
		seen[p.AsString()] = true
		if p.AsString() == "multi" {
			members++
			if s.Parent().SpanID() != multi.SpanContext().SpanID() {
				t.Errorf("a key's span of TryAcquireAll has parent %v, want the TryAcquireAll span %v", s.Parent().SpanID(), multi.SpanContext().SpanID())
			}
		}
	}
	if members != 3 {
		t.Errorf("%d key spans under TryAcquireAll, want 3", members)
	}
	for _, p := range []string{"mutex", "semaphore", "rwlock_read", "rwlock_write", "election", "multi"} {
		if !seen[p] {
			t.Errorf("no acquisition span with distlock.primitive=%s (saw %v)", p, seen)
		}
	}
}

// checkPrimitiveCounts fails t unless counts (metric's data points'
// counts by distlock.primitive) are the test's: 1 for each primitive, 3
// for multi.
func checkPrimitiveCounts(t *testing.T, metric string, counts map[string]uint64) {
	t.Helper()
	for p, n := range map[string]uint64{"mutex": 1, "semaphore": 1, "rwlock_read": 1, "rwlock_write": 1, "election": 1, "multi": 3} {
		if counts[p] != n {
			t.Errorf("%s{distlock.primitive=%s} counts %d, want %d (all: %v)", metric, p, counts[p], n, counts)
		}
	}
}

func countBelow(bounds []float64, v float64) int {
	n := 0
	for _, b := range bounds {
		if b < v {
			n++
		}
	}
	return n
}

func checkServer(t *testing.T, what string, attrs attribute.Set, host string, port int) {
	t.Helper()
	a, _ := attrs.Value("server.address")
	p, _ := attrs.Value("server.port")
	s, _ := attrs.Value("db.system.name")
	if a.AsString() != host || int(p.AsInt64()) != port || s.AsString() != "redis" {
		t.Errorf("%s: server.address %q, server.port %d, db.system.name %q; want %q, %d, redis", what, a.AsString(), p.AsInt64(), s.AsString(), host, port)
	}
}
