package distlock

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"runtime/debug"
	"time"

	"github.com/distlock/distlock/backend"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/trace"
	tracenoop "go.opentelemetry.io/otel/trace/noop"
)

// telemetry is what a Locker reports about itself besides its logs: its
// metrics, its spans (tracing.go), and the events given to WithEvents.
// Its attribute sets are built once, in New, so that recording allocates
// nothing unless keys are recorded (WithKeyAttribute).
type telemetry struct {
	m      instruments
	tracer trace.Tracer
	traced bool // spans are made (the tracer provider is not trace/noop's)
	// unset is the global tracer provider as it is before any SDK is set
	// (otel's delegating default), when that is the Locker's: until
	// otel.SetTracerProvider replaces it, its spans record nothing, so
	// Acquire and Release make none (spansNow). Nil otherwise.
	unset    trace.TracerProvider
	keyLabel func(key string) string
	backend  attribute.KeyValue

	server  []attribute.KeyValue            // server.address, server.port, db.system.name, where known
	base    attrs                           // distlock.backend and the server
	acquire [numPrims][2][numOutcomes]attrs // by primitive, mode (try, wait) and outcome
	// The rest by the hold's primitive, then:
	prims  [numPrims]attrs                   // distlock.lease.in_doubt, .restored
	states [numPrims][numGauges]attrs        // distlock.lease.count, by state
	ended  [numPrims][2]attrs                // distlock.lease.duration: released, lost
	lost   [numPrims][numLostReasons]attrs   // distlock.lease.lost, by reason
	renew  [numPrims][numRenewOutcomes]attrs // distlock.renewals, by outcome
	open   map[*hold]trace.Span              // doubt spans; event goroutine only
}

// gauge is the state in which distlock.lease.count counts a hold.
type gauge int

const (
	gaugeNone gauge = iota
	gaugeHeld
	gaugeInDoubt
	numGauges
)

// holdTelemetry is what a hold keeps for its telemetry. Guarded by
// Locker.mu once the hold is registered.
type holdTelemetry struct {
	label     string            // WithKeyAttribute's label for the key ("": none)
	prim      primitive         // what it was taken as (distlock.primitive)
	link      trace.SpanContext // the span of the acquisition that took the lock
	grantedAt time.Time
	counted   gauge
}

// spansNow reports whether Acquire and Release make spans: the provider is
// not trace/noop's, and not the global one while no SDK is set (checked
// at each call, so an SDK set after the Locker was made is used at once).
func (t *telemetry) spansNow() bool {
	return t.traced && (t.unset == nil || otel.GetTracerProvider() != t.unset)
}

func newTelemetry(cfg lockerConfig, name string, srv backend.Server) *telemetry {
	v := moduleVersion()
	m, err := newInstruments(cfg.meters.Meter(instrumentationName, metric.WithInstrumentationVersion(v)))
	if err != nil {
		otel.Handle(err)
	}
	_, noopTracer := cfg.tracers.(tracenoop.TracerProvider)
	t := &telemetry{
		m: m, tracer: cfg.tracers.Tracer(instrumentationName, trace.WithInstrumentationVersion(v)), traced: !noopTracer,
		keyLabel: cfg.keyLabel, backend: attrBackend.String(name), open: map[*hold]trace.Span{},
		server: serverAttrs(srv),
	}
	if tp := otel.GetTracerProvider(); cfg.tracers == tp && fmt.Sprintf("%T", tp) == "*global.tracerProvider" {
		t.unset = tp
	}
	t.base = newAttrs(append([]attribute.KeyValue{t.backend}, t.server...)...)
	for p := range numPrims {
		for mode, m := range []string{"try", "wait"} {
			for out := range numOutcomes {
				t.acquire[p][mode][out] = t.base.with(attrPrim.String(primNames[p]), attrMode.String(m), attrOutcome.String(outcomeNames[out]))
			}
		}
	}
	for p := range numPrims {
		b := t.base.with(attrPrim.String(primNames[p]))
		t.prims[p] = b
		t.states[p][gaugeHeld] = b.with(attrState.String("held"))
		t.states[p][gaugeInDoubt] = b.with(attrState.String("in_doubt"))
		t.ended[p][0] = b.with(attrOutcome.String("released"))
		t.ended[p][1] = b.with(attrOutcome.String("lost"))
		for r := range numLostReasons {
			t.lost[p][r] = b.with(attrReason.String(lostReasonNames[r]))
		}
		for r := range numRenewOutcomes {
			t.renew[p][r] = b.with(attrOutcome.String(renewOutcomeNames[r]))
		}
	}
	return t
}

// serverAttrs are the semantic conventions' attributes of srv: none for
// an unknown address, no port when it is unknown, no db.system.name for a
// store the conventions do not name.
func serverAttrs(srv backend.Server) []attribute.KeyValue {
	var kvs []attribute.KeyValue
	if srv.Address != "" {
		kvs = append(kvs, attrServerAddr.String(srv.Address))
		if srv.Port > 0 {
			kvs = append(kvs, attrServerPort.Int(srv.Port))
		}
	}
	if srv.System != "" {
		kvs = append(kvs, attrDBSystem.String(srv.System))
	}
	return kvs
}

// moduleVersion is the library's module version as the go command
// recorded it in the binary (its instrumentation scope's version), or
// "devel" when the binary has none (built from a checkout, a replace
// without a version, or without module information).
func moduleVersion() string {
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return "devel"
	}
	mods := append([]*debug.Module{&bi.Main}, bi.Deps...)
	for _, m := range mods {
		if m.Path != instrumentationName {
			continue
		}
		if m.Replace != nil && m.Replace.Version != "" {
			m = m.Replace
		}
		if m.Version != "" && m.Version != "(devel)" && m.Version != "v0.0.0-00010101000000-000000000000" {
			return m.Version
		}
	}
	return "devel"
}

// label returns key's label for the distlock.key attribute ("": none).
func (t *telemetry) label(key string) string {
	if t.keyLabel == nil {
		return ""
	}
	return t.keyLabel(key)
}

// changed reports a change in h's life, in one place: its log line, its
// metrics, and its Event (for WithEvents and the lease spans), which is
// queued, not delivered, here. Locker.mu is held.
func (l *Locker) changed(h *hold, kind EventKind, cause error) {
	now := time.Now()
	l.logChange(h, kind, cause)
	l.tel.record(h, kind, cause, now)
	if !l.wantsEvent(h, kind) {
		return
	}
	ev := Event{Kind: kind, Key: h.key, Owner: h.owner, Token: h.grant.Token, Time: now, Cause: cause, h: h, link: h.tel.link}
	if h.state == holdHeld {
		ev.Deadline = h.deadline
	}
	l.events.push(ev)
}

func (l *Locker) logChange(h *hold, kind EventKind, cause error) {
	if !l.cfg.logger.Enabled(context.Background(), slog.LevelDebug) && (kind == EventAcquired || kind == EventReleased) {
		return // spares boxing the arguments of lines not logged
	}
	switch kind {
	case EventAcquired:
		l.logHold(slog.LevelDebug, "distlock: lease acquired", h, "deadline", h.deadline)
	case EventInDoubt:
		l.logHold(slog.LevelWarn, "distlock: lease in doubt", h, "cause", cause, "deadline", h.deadline)
	case EventRestored:
		l.logHold(slog.LevelInfo, "distlock: lease held again", h, "deadline", h.deadline)
	case EventLost:
		l.logHold(slog.LevelWarn, "distlock: lease lost", h, "cause", errors.Unwrap(cause))
	case EventReleased:
		l.logHold(slog.LevelDebug, "distlock: lease released", h, "cause", cause)
	}
}

// wantsEvent reports whether an Event of kind is queued: always for
// WithEvents; for the lease spans, the changes of a lease in doubt and its
// loss. Locker.mu is held.
func (l *Locker) wantsEvent(h *hold, kind EventKind) bool {
	switch {
	case l.cfg.events != nil:
		return true
	case !l.tel.traced:
		return false
	case kind == EventReleased:
		return h.doubt.cause != nil // ends its doubt span
	}
	return kind != EventAcquired
}

// deliver hands ev to the lease spans and to WithEvents' function. It
// runs on the event goroutine.
func (l *Locker) deliver(ev Event) {
	if l.tel.traced {
		l.tel.leaseSpan(ev)
	}
	if fn := l.cfg.events; fn != nil {
		ev.h, ev.link = nil, trace.SpanContext{}
		fn(ev)
	}
}

// record updates the metrics for a change in h's life. Locker.mu is held.
func (t *telemetry) record(h *hold, kind EventKind, cause error, now time.Time) {
	ctx := context.Background()
	switch kind {
	case EventAcquired:
		h.tel.grantedAt = now
		t.count(ctx, h, gaugeHeld)
	case EventInDoubt:
		t.m.doubts.Add(ctx, 1, t.prims[h.tel.prim].withKey(h.tel.label).add...)
		t.count(ctx, h, gaugeInDoubt)
	case EventRestored:
		t.m.restores.Add(ctx, 1, t.prims[h.tel.prim].withKey(h.tel.label).add...)
		t.count(ctx, h, gaugeHeld)
	case EventLost:
		t.m.losses.Add(ctx, 1, t.lost[h.tel.prim][lostReason(cause)].withKey(h.tel.label).add...)
		t.m.holdTime.Record(ctx, now.Sub(h.tel.grantedAt).Seconds(), t.ended[h.tel.prim][1].withKey(h.tel.label).rec...)
		t.count(ctx, h, gaugeNone)
	case EventReleased:
		t.m.holdTime.Record(ctx, now.Sub(h.tel.grantedAt).Seconds(), t.ended[h.tel.prim][0].withKey(h.tel.label).rec...)
		t.count(ctx, h, gaugeNone)
	}
}

// count moves h to state g in distlock.lease.count.
func (t *telemetry) count(ctx context.Context, h *hold, g gauge) {
	if h.tel.counted == g {
		return
	}
	if h.tel.counted != gaugeNone {
		t.m.leases.Add(ctx, -1, t.states[h.tel.prim][h.tel.counted].add...)
	}
	if g != gaugeNone {
		t.m.leases.Add(ctx, 1, t.states[h.tel.prim][g].add...)
	}
	h.tel.counted = g
}

// renewal records a refresh of h sent at sent that returned err. ctx is
// the refresh's.
func (l *Locker) renewal(ctx context.Context, h *hold, sent time.Time, err error) {
	a := l.tel.renew[h.tel.prim][renewOutcome(err)].withKey(h.tel.label)
	l.tel.m.renewals.Add(ctx, 1, a.add...)
	l.tel.m.renewalTime.Record(ctx, time.Since(sent).Seconds(), a.rec...)
	l.tel.storeError(ctx, "refresh", err)
}

// storeError counts an error a driver call (op) returned, unless it is an
// answer (not acquired, not held) or the end of the caller's ctx while the
// store was answering.
func (t *telemetry) storeError(ctx context.Context, op string, err error) {
	if err == nil || errors.Is(err, ErrNotAcquired) || errors.Is(err, ErrNotHeld) {
		return
	}
	if ctx.Err() != nil && !errors.Is(err, ErrUnavailable) {
		return
	}
	a := t.base.with(attrOp.String(op), attrErrType.String(errorKind(err)))
	t.m.storeErrors.Add(ctx, 1, a.add...)
}

// logHold logs a change of h's state, once per change, with what
// identifies the lease: its key, its owner (whole: at most 128 bytes, and
// a cut one may read as another, "replica-a:8080.<suffix>" as
// "replica-a:80") and its token. Locker.mu is held.
func (l *Locker) logHold(level slog.Level, msg string, h *hold, args ...any) {
	if !l.cfg.logger.Enabled(context.Background(), level) {
		return
	}
	args = append([]any{"key", h.key, "owner", h.owner, "token", h.grant.Token}, args...)
	l.cfg.logger.Log(context.Background(), level, msg, args...)
}
