package distlock

import (
	"context"
	"errors"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/metric/noop"
)

// instrumentationName names the Locker's meter and tracer.
const instrumentationName = "github.com/distlock/distlock"

// The attributes of the Locker's metrics and spans (docs/observability.md).
const (
	attrBackend = attribute.Key("distlock.backend")
	attrKey     = attribute.Key("distlock.key") // only with WithKeyAttribute
	attrMode    = attribute.Key("distlock.acquire.mode")
	attrOutcome = attribute.Key("distlock.outcome")
	attrState   = attribute.Key("distlock.lease.state")
	attrReason  = attribute.Key("distlock.lost.reason")
	attrOp      = attribute.Key("distlock.operation")
	attrErrType = attribute.Key("error.type") // as in the semantic conventions
	attrToken   = attribute.Key("distlock.token")
	attrWait    = attribute.Key("distlock.acquire.wait")
	attrFreed   = attribute.Key("distlock.release.freed")
	attrPrim    = attribute.Key("distlock.primitive")
	attrKeys    = attribute.Key("distlock.keys") // an AcquireAll's number of keys
	// As in the semantic conventions: the store's server, and its
	// db.system.name where the store is a database the conventions name.
	attrServerAddr = attribute.Key("server.address")
	attrServerPort = attribute.Key("server.port")
	attrDBSystem   = attribute.Key("db.system.name")
)

// A primitive is what an acquisition takes, as the distlock.primitive
// attribute names it.
type primitive int

const (
	primMutex primitive = iota
	primSemaphore
	primRead
	primWrite
	primElection
	primMulti // a key of AcquireAll or TryAcquireAll
	numPrims
)

var primNames = [numPrims]string{"mutex", "semaphore", "rwlock_read", "rwlock_write", "election", "multi"}

// Histogram bucket boundaries, in seconds: the SDK's default ones (0 to
// 10000) suit milliseconds, not seconds. The latency buckets start at
// 100 µs: an uncontended Redis acquisition or renewal takes 0.2 to 0.9 ms,
// which the four buckets up to 1 ms tell apart.
var (
	latencyBuckets = []float64{0.0001, 0.00025, 0.0005, 0.00075, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60}
	holdBuckets    = []float64{0.01, 0.1, 0.5, 1, 5, 10, 30, 60, 300, 900, 3600, 14400, 86400}
)

// instruments are the Locker's metrics.
type instruments struct {
	acquireTime metric.Float64Histogram
	holdTime    metric.Float64Histogram
	renewals    metric.Int64Counter
	renewalTime metric.Float64Histogram
	doubts      metric.Int64Counter
	restores    metric.Int64Counter
	losses      metric.Int64Counter
	leases      metric.Int64UpDownCounter
	waiters     metric.Int64UpDownCounter
	storeErrors metric.Int64Counter
}

// newInstruments creates the instruments on m. An instrument m cannot make
// is a no-op one, and the error says which.
func newInstruments(m metric.Meter) (instruments, error) {
	var errs []error
	counter := func(name, unit, desc string) metric.Int64Counter {
		c, err := m.Int64Counter(name, metric.WithUnit(unit), metric.WithDescription(desc))
		if err != nil || c == nil {
			errs, c = append(errs, err), noop.Int64Counter{}
		}
		return c
	}
	histogram := func(name, desc string, buckets []float64) metric.Float64Histogram {
		h, err := m.Float64Histogram(name, metric.WithUnit("s"), metric.WithDescription(desc),
			metric.WithExplicitBucketBoundaries(buckets...))
		if err != nil || h == nil {
			errs, h = append(errs, err), noop.Float64Histogram{}
		}
		return h
	}
	upDown := func(name, unit, desc string) metric.Int64UpDownCounter {
		c, err := m.Int64UpDownCounter(name, metric.WithUnit(unit), metric.WithDescription(desc))
		if err != nil || c == nil {
			errs, c = append(errs, err), noop.Int64UpDownCounter{}
		}
		return c
	}
	in := instruments{
		acquireTime: histogram("distlock.acquire.duration", "How long Acquire and TryAcquire took, waiting included.", latencyBuckets),
		holdTime:    histogram("distlock.lease.duration", "How long a lock was held, from its acquisition to its release or loss.", holdBuckets),
		renewals:    counter("distlock.renewals", "{renewal}", "Renewals (refreshes) of held locks, by outcome."),
		renewalTime: histogram("distlock.renewal.duration", "How long a renewal took to be answered.", latencyBuckets),
		doubts:      counter("distlock.lease.in_doubt", "{lease}", "Leases that went in doubt."),
		restores:    counter("distlock.lease.restored", "{lease}", "Leases in doubt that were held again."),
		losses:      counter("distlock.lease.lost", "{lease}", "Leases that ended without Release, by reason."),
		leases:      upDown("distlock.lease.count", "{lease}", "Locks this Locker holds now, by state (held, in_doubt)."),
		waiters:     upDown("distlock.acquire.waiters", "{waiter}", "Acquire calls waiting for a lock now."),
		storeErrors: counter("distlock.store.errors", "{error}", "Errors the store returned, by operation and kind."),
	}
	return in, errors.Join(errs...)
}

// attrs is a set of attributes in the form instruments take it, built
// once (per Locker, or per hold when keys are recorded) so that recording
// allocates nothing.
type attrs struct {
	kvs []attribute.KeyValue
	add []metric.AddOption
	rec []metric.RecordOption
}

func newAttrs(kvs ...attribute.KeyValue) attrs {
	o := metric.WithAttributeSet(attribute.NewSet(kvs...))
	return attrs{kvs: kvs, add: []metric.AddOption{o}, rec: []metric.RecordOption{o}}
}

// with returns a's attributes and kvs.
func (a attrs) with(kvs ...attribute.KeyValue) attrs {
	return newAttrs(append(append([]attribute.KeyValue(nil), a.kvs...), kvs...)...)
}

// withKey adds the key's label, if any.
func (a attrs) withKey(label string) attrs {
	if label == "" {
		return a
	}
	return a.with(attrKey.String(label))
}

// An acquisition's outcome.
type outcome int

const (
	outAcquired    outcome = iota // a Lease was returned
	outNotAcquired                // TryAcquire found the lock held
	outCanceled                   // ctx ended or the Locker closed, the store answering
	outError                      // anything else, an unreachable store included
	numOutcomes
)

var outcomeNames = [numOutcomes]string{"acquired", "not_acquired", "canceled", "error"}

// acquireOutcome classifies what an acquisition with ctx returned.
func acquireOutcome(ctx context.Context, err error) outcome {
	switch {
	case err == nil:
		return outAcquired
	case errors.Is(err, ErrNotAcquired):
		return outNotAcquired
	case errors.Is(err, ErrUnavailable):
		return outError
	case ctx.Err() != nil, errors.Is(err, ErrClosed):
		return outCanceled
	}
	return outError
}

// errorKind is the error.type an error is recorded with: the kind it
// matches, never its text (which names the key).
func errorKind(err error) string {
	for _, k := range errorKinds {
		if errors.Is(err, k.err) {
			return k.name
		}
	}
	return "_OTHER"
}

// errorKinds in the order errorKind tries them: an unreachable store
// first, as its errors may also carry a ctx's.
var errorKinds = [...]struct {
	err  error
	name string
}{
	{ErrUnavailable, "unavailable"}, {ErrNotAcquired, "not_acquired"},
	{ErrLost, "lost"}, {ErrNotHeld, "not_held"}, {ErrReleased, "released"},
	{ErrClosed, "closed"}, {ErrInvalidKey, "invalid_key"},
	{ErrInvalidConfig, "invalid_config"}, {ErrUnsupported, "unsupported"},
	{context.Canceled, "canceled"}, {context.DeadlineExceeded, "deadline_exceeded"},
}

// Renewal outcomes.
const (
	renewOK = iota
	renewNotHeld
	renewFailed
	numRenewOutcomes
)

var renewOutcomeNames = [numRenewOutcomes]string{"renewed", "not_held", "error"}

func renewOutcome(err error) int {
	switch {
	case err == nil:
		return renewOK
	case errors.Is(err, ErrNotHeld):
		return renewNotHeld
	}
	return renewFailed
}

// Reasons a lease was lost.
const (
	lostNotHeld  = iota // the store said the lock is gone
	lostExpired         // its validity ran out
	lostReported        // the driver reported it (session or connection ended)
	numLostReasons
)

var lostReasonNames = [numLostReasons]string{"not_held", "expired", "reported"}

func lostReason(cause error) int {
	var exp *expiredError
	switch {
	case errors.As(cause, &exp):
		return lostExpired
	case errors.Is(cause, ErrNotHeld):
		return lostNotHeld
	}
	return lostReported
}
