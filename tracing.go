package distlock

import (
	"context"
	"errors"
	"math"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"
	tracenoop "go.opentelemetry.io/otel/trace/noop"
)

// Spans. Acquire, TryAcquire and Release each make a span, a child of the
// span in the caller's ctx, so a lock shows up inside the request that
// took it; the driver's calls get it as their parent. A lease's doubt and
// loss come after Acquire has returned and its span has ended, often after
// the request that took the lock has ended too: they make spans of their
// own, each the root of a new trace linked to the acquisition's span (a
// lease can outlive its request by hours; a child span would stretch the
// request's trace, or hang off a span that ended long ago). A doubt is a
// span from going in doubt to being held again, lost or released; a loss
// not preceded by doubt is an instant span. Span errors record the error's
// kind (error.type), never its text, which names the key.

// noSpan stands for the spans not made when the tracer provider is the
// no-op one (trace/noop): Start would still allocate a ctx for each.
var noSpan trace.Span = tracenoop.Span{}

// acquireParent is the ctx key under which an acquisition's ctx, carrying
// its span, keeps the caller's ctx: the Lease's context is made from the
// caller's, whose current span is the caller's own, not the ended
// acquisition's.
type acquireParent struct{}

// leaseBase returns the caller's ctx of an acquisition's ctx.
func leaseBase(ctx context.Context) context.Context {
	if p, ok := ctx.Value(acquireParent{}).(context.Context); ok {
		return p
	}
	return ctx
}

// acquireOp is an acquisition being measured and traced.
type acquireOp struct {
	t     *telemetry
	span  trace.Span
	start time.Time
	wait  bool
	prim  primitive
	label string
}

// startAcquire starts measuring an acquisition of key, a prim, and its
// span. It returns the ctx for the acquisition: ctx itself unless the
// span records.
func (t *telemetry) startAcquire(ctx context.Context, key string, wait bool, prim primitive) (context.Context, acquireOp) {
	name := "distlock.TryAcquire"
	if wait {
		name = "distlock.Acquire"
	}
	op := acquireOp{t: t, span: noSpan, start: time.Now(), wait: wait, prim: prim, label: t.label(key)}
	if !t.spansNow() {
		return ctx, op
	}
	sctx, span := t.tracer.Start(ctx, name)
	op.span = span
	if !span.IsRecording() {
		return ctx, op
	}
	span.SetAttributes(t.spanAttrs(op.label)...)
	span.SetAttributes(attrPrim.String(primNames[prim]))
	return context.WithValue(sctx, acquireParent{}, leaseBase(ctx)), op
}

// holdTag is what a hold's telemetry records of how it was taken: its
// WithKeyAttribute label and its primitive.
type holdTag struct {
	label string
	prim  primitive
}

func (op *acquireOp) tag() holdTag { return holdTag{op.label, op.prim} }

// startMulti starts the span of an AcquireAll or TryAcquireAll of n keys,
// the parent of its keys' acquisition spans (and of the store step that
// takes them at once).
func (t *telemetry) startMulti(ctx context.Context, n int, wait bool) (context.Context, trace.Span) {
	if !t.spansNow() {
		return ctx, noSpan
	}
	name := "distlock.TryAcquireAll"
	if wait {
		name = "distlock.AcquireAll"
	}
	sctx, span := t.tracer.Start(ctx, name)
	if !span.IsRecording() {
		return ctx, span
	}
	span.SetAttributes(t.spanAttrs("")...)
	span.SetAttributes(attrPrim.String(primNames[primMulti]), attrKeys.Int(n))
	return context.WithValue(sctx, acquireParent{}, leaseBase(ctx)), span
}

// endMulti ends an AcquireAll's span.
func endMulti(span trace.Span, err error) {
	if span.IsRecording() && err != nil && !errors.Is(err, ErrNotAcquired) {
		setSpanError(span, err)
	}
	span.End()
}

// end records the acquisition's outcome; ctx is the caller's.
func (op *acquireOp) end(ctx context.Context, le *Lease, err error) {
	took := time.Since(op.start)
	out := acquireOutcome(ctx, err)
	mode := 0
	if op.wait {
		mode = 1
	}
	a := op.t.acquire[op.prim][mode][out]
	if out == outError {
		a = a.with(attrErrType.String(errorKind(err)))
	}
	a = a.withKey(op.label)
	op.t.m.acquireTime.Record(ctx, took.Seconds(), a.rec...)
	if op.span.IsRecording() {
		op.span.SetAttributes(attrOutcome.String(outcomeNames[out]), attrWait.Float64(took.Seconds()))
		if le != nil {
			op.span.SetAttributes(tokenAttr(le.h.grant.Token))
		}
		if out != outNotAcquired {
			setSpanError(op.span, err)
		}
	}
	op.span.End()
}

// startRelease starts the span of a Lease's Release.
func (t *telemetry) startRelease(ctx context.Context, h *hold) (context.Context, trace.Span) {
	if !t.spansNow() {
		return ctx, noSpan
	}
	ctx, span := t.tracer.Start(ctx, "distlock.Release")
	if span.IsRecording() {
		span.SetAttributes(t.spanAttrs(h.tel.label)...)
		span.SetAttributes(attrPrim.String(primNames[h.tel.prim]), tokenAttr(h.grant.Token))
	}
	return ctx, span
}

// endRelease ends a Release's span; freed tells whether the call released
// the lock in the store (the last Lease on it).
func endRelease(span trace.Span, freed bool, err error) {
	if span.IsRecording() {
		span.SetAttributes(attrFreed.Bool(freed))
		setSpanError(span, err)
	}
	span.End()
}

// leaseSpan records a lease's doubt and loss (see Spans above). It runs on
// the event goroutine, which owns t.open.
func (t *telemetry) leaseSpan(ev Event) {
	if ev.Kind == EventInDoubt {
		span := t.startLeaseSpan(ev, "distlock.lease.doubt")
		span.SetAttributes(attrErrType.String(errorKind(ev.Cause)))
		t.open[ev.h] = span
		return
	}
	span, ok := t.open[ev.h]
	switch {
	case ok:
		delete(t.open, ev.h)
	case ev.Kind == EventLost:
		span = t.startLeaseSpan(ev, "distlock.lease.lost")
	default:
		return
	}
	span.SetAttributes(attrOutcome.String(ev.Kind.String()))
	if ev.Kind == EventLost {
		span.SetAttributes(attrReason.String(lostReasonNames[lostReason(ev.Cause)]))
		span.SetStatus(codes.Error, "lease lost")
	}
	span.End(trace.WithTimestamp(ev.Time))
}

func (t *telemetry) startLeaseSpan(ev Event, name string) trace.Span {
	opts := []trace.SpanStartOption{trace.WithNewRoot(), trace.WithTimestamp(ev.Time)}
	if ev.link.IsValid() {
		opts = append(opts, trace.WithLinks(trace.Link{SpanContext: ev.link}))
	}
	_, span := t.tracer.Start(context.Background(), name, opts...)
	span.SetAttributes(t.spanAttrs(ev.h.tel.label)...)
	span.SetAttributes(attrPrim.String(primNames[ev.h.tel.prim]), tokenAttr(ev.Token))
	return span
}

// spanAttrs are the attributes every span has: the backend, and the key's
// label if any.
func (t *telemetry) spanAttrs(label string) []attribute.KeyValue {
	kvs := append([]attribute.KeyValue{t.backend}, t.server...)
	if label == "" {
		return kvs
	}
	return append(kvs, attrKey.String(label))
}

// tokenAttr records a fencing token (as an int64: tokens past 2^63 are
// recorded as the largest int64).
func tokenAttr(token uint64) attribute.KeyValue {
	return attrToken.Int64(int64(min(token, math.MaxInt64)))
}

// setSpanError marks span failed with err's kind, if err is not nil.
func setSpanError(span trace.Span, err error) {
	if err == nil {
		return
	}
	kind := errorKind(err)
	span.SetAttributes(attrErrType.String(kind))
	span.SetStatus(codes.Error, kind)
}
