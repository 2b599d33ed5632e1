package scale

import (
	"context"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/metric/noop"
)

// meter is an OpenTelemetry meter (API only, no SDK) that keeps what the
// scale run reads from a Locker's own metrics: renewals by outcome, leases
// that went in doubt or were lost, and every renewal's duration with the
// instant its batch was sent, from which the renewal rounds are rebuilt.
type meter struct {
	noop.Meter
	renewed, renewFailed atomic.Int64
	doubts, losses       atomic.Int64

	mu     sync.Mutex
	rounds []renewalRecord
}

// renewalRecord is one lease's renewal: when its batch went out, and how
// long until the portable layer recorded the answer.
type renewalRecord struct {
	sent time.Time
	took time.Duration
}

type meterProvider struct {
	noop.MeterProvider
	m *meter
}

func (p meterProvider) Meter(string, ...metric.MeterOption) metric.Meter { return p.m }

func newMeter() (*meter, metric.MeterProvider) {
	m := &meter{}
	return m, meterProvider{m: m}
}

// reset forgets everything recorded so far.
func (m *meter) reset() {
	m.renewed.Store(0)
	m.renewFailed.Store(0)
	m.doubts.Store(0)
	m.losses.Store(0)
	m.mu.Lock()
	m.rounds = nil
	m.mu.Unlock()
}

func (m *meter) Int64Counter(name string, _ ...metric.Int64CounterOption) (metric.Int64Counter, error) {
	c := counter{m: m}
	switch name {
	case "distlock.renewals":
		c.add = func(n int64, ok bool) {
			if ok {
				m.renewed.Add(n)
			} else {
				m.renewFailed.Add(n)
			}
		}
	case "distlock.lease.in_doubt":
		c.add = func(n int64, _ bool) { m.doubts.Add(n) }
	case "distlock.lease.lost":
		c.add = func(n int64, _ bool) { m.losses.Add(n) }
	}
	return c, nil
}

func (m *meter) Float64Histogram(name string, _ ...metric.Float64HistogramOption) (metric.Float64Histogram, error) {
	if name != "distlock.renewal.duration" {
		return noop.Float64Histogram{}, nil
	}
	return renewalHistogram{m: m}, nil
}

type counter struct {
	noop.Int64Counter
	m   *meter
	add func(n int64, ok bool)
}

func (c counter) Add(_ context.Context, n int64, opts ...metric.AddOption) {
	if c.add == nil {
		return
	}
	ok := true
	attrs := metric.NewAddConfig(opts).Attributes()
	if v, found := attrs.Value("distlock.outcome"); found {
		ok = v.AsString() == "renewed"
	}
	c.add(n, ok)
}

type renewalHistogram struct {
	noop.Float64Histogram
	m *meter
}

func (h renewalHistogram) Record(_ context.Context, seconds float64, _ ...metric.RecordOption) {
	took := time.Duration(seconds * float64(time.Second))
	r := renewalRecord{sent: time.Now().Add(-took), took: took}
	h.m.mu.Lock()
	h.m.rounds = append(h.m.rounds, r)
	h.m.mu.Unlock()
}

// round is one renewal round: the renewals the watchdog sent together.
type round struct {
	leases int
	took   time.Duration // until the last of them was recorded
}

// renewalRounds groups the recorded renewals into rounds: renewals of one
// batch share the instant they were sent (recovered here from the record's
// time minus its duration, to within microseconds), and batches are at
// least a few milliseconds apart.
func (m *meter) renewalRounds() []round {
	m.mu.Lock()
	recs := slices.Clone(m.rounds)
	m.mu.Unlock()
	slices.SortFunc(recs, func(a, b renewalRecord) int { return a.sent.Compare(b.sent) })
	const gap = time.Millisecond
	var out []round
	for i, r := range recs {
		if i == 0 || r.sent.Sub(recs[i-1].sent) > gap {
			out = append(out, round{})
		}
		cur := &out[len(out)-1]
		cur.leases++
		cur.took = max(cur.took, r.took)
	}
	return out
}
