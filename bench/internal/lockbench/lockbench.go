// Package lockbench holds what the per-store comparisons of the bench
// module share beyond the measurement core (internal/measure, which times
// every contended and uncontended run and computes every percentile): a
// server for the comparison, unique keys, the uncontended benchmark, and
// distlock's Locker as a contender.
package lockbench

import (
	"context"
	"fmt"
	"os"
	"sync/atomic"
	"testing"
	"time"

	"github.com/distlock/distlock"
	"github.com/distlock/distlock/bench/internal/measure"
	"github.com/distlock/distlock/sandbox"
)

var keySeq atomic.Int64

// UniqueKey returns a key no other run uses.
func UniqueKey(prefix string) string {
	return fmt.Sprintf("bench-%s-%d-%d", prefix, time.Now().UnixNano(), keySeq.Add(1))
}

// callTimeout bounds every call of the uncontended benchmark.
const callTimeout = 30 * time.Second

// Uncontended measures one acquire + release of a free key, after one
// warm-up pair (the key's state created, pools filled). Every pair carries
// a deadline, as production calls do (a call without one skips, for
// instance, go-sql-driver's per-statement cancel watcher; the Locker
// always derives a cancellable context, so distlock never gets such a
// shortcut).
func Uncontended(b *testing.B, lib measure.Library) {
	x, err := lib.Make()
	if err != nil {
		b.Fatal(err)
	}
	defer x.Close()
	key := UniqueKey("uncontended")
	if err := pair(x, key); err != nil {
		b.Fatal(err)
	}
	for b.Loop() {
		if err := pair(x, key); err != nil {
			b.Fatal(err)
		}
	}
}

// pair takes and frees key once, under callTimeout.
func pair(x measure.Contender, key string) error {
	ctx, cancel := context.WithTimeout(context.Background(), callTimeout)
	defer cancel()
	release, err := x.Acquire(ctx, key)
	if err != nil {
		return err
	}
	return release(ctx)
}

// NsPerOp returns a benchmark result's time per operation.
func NsPerOp(r testing.BenchmarkResult) time.Duration { return time.Duration(r.NsPerOp()) }

// Main starts one server of kind for a comparison package's tests, sets
// *addr to its address, runs them, and stops it.
func Main(m *testing.M, kind sandbox.Kind, addr *string) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	g, err := sandbox.Start(ctx, sandbox.Spec{Kind: kind})
	cancel()
	if err != nil {
		fmt.Fprintf(os.Stderr, "lockbench: no %s server: %v\n", kind, err)
		os.Exit(1)
	}
	*addr = g.Addrs()[0]
	code := m.Run()
	if err := g.Close(); err != nil {
		fmt.Fprintln(os.Stderr, "lockbench:", err)
	}
	os.Exit(code)
}

// LockerContender is a distlock Locker as a contender.
type LockerContender struct {
	// L is the Locker.
	L *distlock.Locker
	// CloseClient, when not nil, closes the client under the Locker; Close
	// calls it after closing the Locker.
	CloseClient func()
}

// Acquire waits for key.
func (c *LockerContender) Acquire(ctx context.Context, key string) (func(context.Context) error, error) {
	le, err := c.L.Acquire(ctx, key)
	if err != nil {
		return nil, err
	}
	return le.Release, nil
}

// Try makes one attempt to take key.
func (c *LockerContender) Try(ctx context.Context, key string) (func(context.Context) error, error) {
	le, err := c.L.TryAcquire(ctx, key)
	if err != nil {
		return nil, err
	}
	return le.Release, nil
}

// Close closes the Locker, then its client.
func (c *LockerContender) Close() {
	_ = c.L.Close()
	if c.CloseClient != nil {
		c.CloseClient()
	}
}

// Summarize is [measure.Summarize] rounded to 10 µs, as the reports print
// durations.
func Summarize(ds []time.Duration) measure.Summary {
	return measure.Summarize(ds).Round(10 * time.Microsecond)
}
