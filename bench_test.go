package distlock_test

import (
	"context"
	"fmt"
	"sync"
	"testing"

	"github.com/distlock/distlock"
	"github.com/distlock/distlock/memlock"
	metricnoop "go.opentelemetry.io/otel/metric/noop"
	tracenoop "go.opentelemetry.io/otel/trace/noop"
)

// BenchmarkAcquireRelease measures the portable layer's own cost per
// uncontended acquire+release over the in-process store.
func BenchmarkAcquireRelease(b *testing.B) { benchAcquireRelease(b) }

// BenchmarkAcquireReleaseOTel measures what telemetry adds to
// BenchmarkAcquireRelease: with the default providers (the global ones,
// none set: no-op), with no-op providers given, and with fakes of the
// OpenTelemetry API that record every measurement and span (an SDK does
// more per measurement, and exports), with and without WithEvents.
func BenchmarkAcquireReleaseOTel(b *testing.B) {
	noop := []distlock.LockerOption{
		distlock.WithMeterProvider(metricnoop.NewMeterProvider()),
		distlock.WithTracerProvider(tracenoop.NewTracerProvider()),
	}
	recording := func() []distlock.LockerOption {
		return []distlock.LockerOption{
			distlock.WithMeterProvider(newFakeMeterProvider()),
			distlock.WithTracerProvider(newFakeTracerProvider(false)),
		}
	}
	b.Run("default", func(b *testing.B) { benchAcquireRelease(b) })
	b.Run("noop", func(b *testing.B) { benchAcquireRelease(b, noop...) })
	b.Run("recording", func(b *testing.B) { benchAcquireRelease(b, recording()...) })
	b.Run("recording+events", func(b *testing.B) {
		benchAcquireRelease(b, append(recording(), distlock.WithEvents(func(distlock.Event) {}))...)
	})
}

func benchAcquireRelease(b *testing.B, opts ...distlock.LockerOption) {
	d, err := memlock.NewStore().NewDriver(nil)
	if err != nil {
		b.Fatal(err)
	}
	l := distlock.New(d, opts...)
	defer l.Close()
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		le, err := l.Acquire(ctx, "k")
		if err != nil {
			b.Fatal(err)
		}
		if err := le.Release(ctx); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkContended measures 8 Lockers (as 8 processes) taking one key of
// the in-process store in turn: hand-offs through the portable layer.
func BenchmarkContended(b *testing.B) {
	s := memlock.NewStore()
	const workers = 8
	ls := make([]*distlock.Locker, workers)
	for i := range ls {
		d, err := s.NewDriver(nil)
		if err != nil {
			b.Fatal(err)
		}
		ls[i] = distlock.New(d)
		defer ls[i].Close()
	}
	ctx := context.Background()
	b.ResetTimer()
	var wg sync.WaitGroup
	per := b.N/workers + 1
	for i := range workers {
		wg.Go(func() {
			for range per {
				le, err := ls[i].Acquire(ctx, "k")
				if err != nil {
					panic(fmt.Sprint(err))
				}
				if err := le.Release(ctx); err != nil {
					panic(fmt.Sprint(err))
				}
			}
		})
	}
	wg.Wait()
}
