package distlock_test

import (
	"context"
	"encoding/binary"
	"math/rand/v2"
	"sync"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/metric/embedded"
	metricnoop "go.opentelemetry.io/otel/metric/noop"
	"go.opentelemetry.io/otel/trace"
	tracenoop "go.opentelemetry.io/otel/trace/noop"
)

// Fakes of the OpenTelemetry API (no SDK): a meter that sums what its
// instruments record, per instrument and attribute set, and a tracer that
// keeps its spans.

type fakeMeterProvider struct {
	metricnoop.MeterProvider
	m *fakeMeter
}

func newFakeMeterProvider() fakeMeterProvider {
	return fakeMeterProvider{m: &fakeMeter{series: map[seriesKey]*series{}}}
}

func (p fakeMeterProvider) Meter(string, ...metric.MeterOption) metric.Meter { return p.m }

type seriesKey struct {
	name  string
	attrs attribute.Distinct
}

// series is what one instrument recorded with one attribute set.
type series struct {
	attrs attribute.Set
	sum   float64
	n     int // measurements
}

type fakeMeter struct {
	metricnoop.Meter
	mu     sync.Mutex
	series map[seriesKey]*series
	units  map[string]string
}

func (m *fakeMeter) record(name string, v float64, attrs attribute.Set) {
	m.mu.Lock()
	defer m.mu.Unlock()
	k := seriesKey{name, attrs.Equivalent()}
	s := m.series[k]
	if s == nil {
		s = &series{attrs: attrs}
		m.series[k] = s
	}
	s.sum += v
	s.n++
}

func (m *fakeMeter) unit(name, unit string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.units == nil {
		m.units = map[string]string{}
	}
	m.units[name] = unit
}

// get sums, over the series of instrument name whose attributes include
// want (key=value pairs), the values recorded and the measurements.
func (m *fakeMeter) get(name string, want ...string) (sum float64, n int) {
	m.mu.Lock()
	defer m.mu.Unlock()
	for k, s := range m.series {
		if k.name == name && hasAttrs(s.attrs, want) {
			sum, n = sum+s.sum, n+s.n
		}
	}
	return sum, n
}

// sets returns every attribute set recorded.
func (m *fakeMeter) sets() []attribute.Set {
	m.mu.Lock()
	defer m.mu.Unlock()
	var out []attribute.Set
	for _, s := range m.series {
		out = append(out, s.attrs)
	}
	return out
}

func hasAttrs(set attribute.Set, want []string) bool {
	for i := 0; i+1 < len(want); i += 2 {
		v, ok := set.Value(attribute.Key(want[i]))
		if !ok || v.String() != want[i+1] {
			return false
		}
	}
	return true
}

func (m *fakeMeter) Int64Counter(name string, opts ...metric.Int64CounterOption) (metric.Int64Counter, error) {
	m.unit(name, metric.NewInt64CounterConfig(opts...).Unit())
	return fakeCounter{fakeAdd: fakeAdd{m: m, name: name}}, nil
}

func (m *fakeMeter) Int64UpDownCounter(name string, opts ...metric.Int64UpDownCounterOption) (metric.Int64UpDownCounter, error) {
	m.unit(name, metric.NewInt64UpDownCounterConfig(opts...).Unit())
	return fakeUpDown{fakeAdd: fakeAdd{m: m, name: name}}, nil
}

func (m *fakeMeter) Float64Histogram(name string, opts ...metric.Float64HistogramOption) (metric.Float64Histogram, error) {
	m.unit(name, metric.NewFloat64HistogramConfig(opts...).Unit())
	return fakeHistogram{m: m, name: name}, nil
}

// fakeAdd is the Add of both integer counters: it records into m, under
// name. Enabled answers as the noop instruments' does.
type fakeAdd struct {
	m    *fakeMeter
	name string
}

func (c fakeAdd) Add(_ context.Context, v int64, opts ...metric.AddOption) {
	c.m.record(c.name, float64(v), metric.NewAddConfig(opts).Attributes())
}

func (fakeAdd) Enabled(context.Context) bool { return false }

type fakeCounter struct {
	embedded.Int64Counter
	fakeAdd
}

type fakeUpDown struct {
	embedded.Int64UpDownCounter
	fakeAdd
}

type fakeHistogram struct {
	metricnoop.Float64Histogram
	m    *fakeMeter
	name string
}

func (h fakeHistogram) Record(_ context.Context, v float64, opts ...metric.RecordOption) {
	h.m.record(h.name, v, metric.NewRecordConfig(opts).Attributes())
}

type fakeTracerProvider struct {
	tracenoop.TracerProvider
	t *fakeTracer
}

// newFakeTracerProvider returns a tracer provider keeping its spans, or
// only counting them if !keep.
func newFakeTracerProvider(keep bool) fakeTracerProvider {
	return fakeTracerProvider{t: &fakeTracer{keep: keep}}
}

func (p fakeTracerProvider) Tracer(string, ...trace.TracerOption) trace.Tracer { return p.t }

type fakeTracer struct {
	tracenoop.Tracer
	keep  bool
	mu    sync.Mutex
	spans []*fakeSpan
	count int
}

func (t *fakeTracer) Start(ctx context.Context, name string, opts ...trace.SpanStartOption) (context.Context, trace.Span) {
	cfg := trace.NewSpanStartConfig(opts...)
	parent := trace.SpanContextFromContext(ctx)
	if cfg.NewRoot() {
		parent = trace.SpanContext{}
	}
	tid := parent.TraceID()
	if !tid.IsValid() {
		binary.LittleEndian.PutUint64(tid[:8], rand.Uint64())
		binary.LittleEndian.PutUint64(tid[8:], rand.Uint64())
	}
	var sid trace.SpanID
	binary.LittleEndian.PutUint64(sid[:], rand.Uint64())
	s := &fakeSpan{
		name: name, parent: parent, links: cfg.Links(), start: cfg.Timestamp(),
		sc:    trace.NewSpanContext(trace.SpanContextConfig{TraceID: tid, SpanID: sid, TraceFlags: trace.FlagsSampled}),
		attrs: map[attribute.Key]attribute.Value{},
	}
	s.SetAttributes(cfg.Attributes()...)
	t.mu.Lock()
	t.count++
	if t.keep {
		t.spans = append(t.spans, s)
	}
	t.mu.Unlock()
	return trace.ContextWithSpan(ctx, s), s
}

// named returns the spans called name, in the order they started.
func (t *fakeTracer) named(name string) []*fakeSpan {
	t.mu.Lock()
	defer t.mu.Unlock()
	var out []*fakeSpan
	for _, s := range t.spans {
		if s.name == name {
			out = append(out, s)
		}
	}
	return out
}

type fakeSpan struct {
	tracenoop.Span
	name   string
	parent trace.SpanContext
	sc     trace.SpanContext
	links  []trace.Link
	start  time.Time

	mu     sync.Mutex
	attrs  map[attribute.Key]attribute.Value
	status codes.Code
	ended  bool
}

func (s *fakeSpan) SpanContext() trace.SpanContext { return s.sc }
func (s *fakeSpan) IsRecording() bool              { return true }

func (s *fakeSpan) SetAttributes(kvs ...attribute.KeyValue) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, kv := range kvs {
		s.attrs[kv.Key] = kv.Value
	}
}

func (s *fakeSpan) SetStatus(c codes.Code, _ string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.status = c
}

func (s *fakeSpan) End(...trace.SpanEndOption) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.ended = true
}

// attr returns the attribute k as a string ("" if absent).
func (s *fakeSpan) attr(k string) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	v, ok := s.attrs[attribute.Key(k)]
	if !ok {
		return ""
	}
	return v.String()
}

// state returns the span's status and whether it has ended.
func (s *fakeSpan) state() (codes.Code, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.status, s.ended
}
