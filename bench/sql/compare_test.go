package sqlbench

import (
	"context"
	"fmt"
	"os"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/distlock/distlock/bench/internal/lockbench"
	"github.com/distlock/distlock/bench/internal/measure"
)

const (
	contendWorkers = 8
	contendFor     = 3 * time.Second
	// rounds: every figure is the best of this many rounds, in rotating
	// order, so a burst of load from other processes on a shared machine
	// does not decide a ratio.
	rounds = 3
)

// baseline is the contender every ratio is taken against: the bare
// BEGIN; SELECT ... FOR UPDATE; COMMIT over a default *sql.DB.
const baseline = "FOR UPDATE"

// TestCompare runs every scenario for every contender in one run and prints
// a side-by-side report with ratios against the bare FOR UPDATE (go test
// -v -run TestCompare). It asserts only that the locks were exclusive.
func TestCompare(t *testing.T) {
	if testing.Short() {
		t.Skip("short mode")
	}
	var out strings.Builder
	p := func(format string, args ...any) { fmt.Fprintf(&out, format, args...) }

	var sel time.Duration
	for range rounds {
		sel = best(sel, lockbench.NsPerOp(testing.Benchmark(benchSelect1)))
	}
	p("bare SELECT 1 round trip: %v (best of %d)\n\n", sel, rounds)

	p("uncontended acquire+release (one client, one free key; best of %d):\n", rounds)
	unc := map[string]time.Duration{}
	uncRound := map[string][]time.Duration{}
	for r := range rounds {
		for _, c := range measure.Rotate(contenders, r) {
			res := testing.Benchmark(func(b *testing.B) { lockbench.Uncontended(b, c) })
			unc[c.Name] = best(unc[c.Name], lockbench.NsPerOp(res))
			uncRound[c.Name] = append(uncRound[c.Name], lockbench.NsPerOp(res))
		}
	}
	for _, c := range contenders {
		p("  %-18s %10v  = %5.2f SELECT 1s   this/FOR UPDATE = %.2f   each round:", c.Name, unc[c.Name],
			float64(unc[c.Name])/float64(sel), float64(unc[c.Name])/float64(unc[baseline]))
		for r, d := range uncRound[c.Name] {
			p(" %.2f", float64(d)/float64(uncRound[baseline][r]))
		}
		p("\n")
	}

	p("\n%d workers (own client each) on one key for %v, each cycle lock, read-modify-write of a shared integer, unlock (best of %d):\n",
		contendWorkers, contendFor, rounds)
	run := measure.Run{Key: lockbench.UniqueKey("contended"), Workers: contendWorkers, For: contendFor, WarmUp: true}
	rs, err := measure.ContendRounds(context.Background(), withRMW(contenders), rounds, run)
	if err != nil && rs == nil {
		t.Fatal(err)
	} else if err != nil {
		t.Error(err) // overlaps
	}
	for _, c := range contenders {
		b, bl := rs[c.Name].Best(), rs[baseline].Best()
		p("  %-18s %8.0f acq/s   per worker min %d max %d   this/FOR UPDATE = %.2f   each round:", c.Name, b.Rate(),
			slices.Min(b.Counts), slices.Max(b.Counts), b.Rate()/bl.Rate())
		for r, rate := range rs[c.Name].Rates() {
			p(" %.2f", rate/rs[baseline].Rates()[r])
		}
		p("\n")
	}
	if lost := rmwLost.Load(); lost != 0 {
		t.Errorf("%d read-modify-writes of the shared integer were lost: two holders at once", lost)
	}
	fmt.Fprint(os.Stdout, out.String())
	t.Log("\n" + out.String())
}

// best returns the smaller of two durations, ignoring an unset (zero) one.
func best(a, b time.Duration) time.Duration {
	if a == 0 || b < a {
		return b
	}
	return a
}

func benchSelect1(b *testing.B) {
	db := openDefault(addr)
	defer db.Close()
	ctx := context.Background()
	for b.Loop() {
		var one int
		if err := db.QueryRowContext(ctx, "SELECT 1").Scan(&one); err != nil {
			b.Fatal(err)
		}
	}
}

// rmwLost counts read-modify-writes of a contended run's shared integer
// that another holder's overwrote.
var rmwLost atomic.Int64

// withRMW returns libs whose contenders, once they hold the lock, read a
// shared integer (one per library), and write it back incremented, as the
// independent comparison of issue 17 did: a lost update means two holders
// at once.
func withRMW(libs []measure.Library) []measure.Library {
	out := make([]measure.Library, len(libs))
	for i, lib := range libs {
		shared := new(atomic.Int64)
		out[i] = measure.Library{Name: lib.Name, Make: func() (measure.Contender, error) {
			x, err := lib.Make()
			if err != nil {
				return nil, err
			}
			return rmwContender{x, shared}, nil
		}}
	}
	return out
}

type rmwContender struct {
	measure.Contender
	shared *atomic.Int64
}

func (c rmwContender) Acquire(ctx context.Context, key string) (func(context.Context) error, error) {
	release, err := c.Contender.Acquire(ctx, key)
	if err != nil {
		return nil, err
	}
	v := c.shared.Load()
	if !c.shared.CompareAndSwap(v, v+1) {
		rmwLost.Add(1)
	}
	return release, nil
}
