package zkbench

import (
	"context"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// benchExists measures a bare Exists round trip: the floor of any lock
// operation.
func benchExists(b *testing.B) {
	conn, err := newConn()
	if err != nil {
		b.Fatal(err)
	}
	defer conn.Close()
	for b.Loop() {
		if _, _, err := conn.Exists("/"); err != nil {
			b.Fatal(err)
		}
	}
}

// benchUncontended measures one acquire + release of a free key.
func benchUncontended(b *testing.B, lib library) {
	x, err := lib.make()
	if err != nil {
		b.Fatal(err)
	}
	defer x.close()
	ctx := context.Background()
	key := uniqueKey("uncontended")
	for b.Loop() {
		rel, err := x.acquire(ctx, key)
		if err != nil {
			b.Fatal(err)
		}
		if err := rel(ctx); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkExists(b *testing.B) { benchExists(b) }

func BenchmarkUncontended(b *testing.B) {
	for _, lib := range libraries {
		b.Run(lib.name, func(b *testing.B) { benchUncontended(b, lib) })
	}
}

// contention is the outcome of workers contending for one key.
type contention struct {
	acquisitions int
	duration     time.Duration
	handoffs     []time.Duration // from a release's start to the next holder's grant
	waits        [][]time.Duration
	counts       []int
	overlaps     int64 // times two workers held the lock at once (must be 0)
	overtakes    int   // grants to a worker that queued after one still waiting
}

// contend runs workers, each with its own session, taking key in
// a loop for d with nothing done inside or between acquisitions.
func contend(lib library, workers int, d time.Duration) (contention, error) {
	key := uniqueKey("contended")
	xs := make([]contender, workers)
	for i := range xs {
		x, err := lib.make()
		if err != nil {
			return contention{}, err
		}
		xs[i] = x
		defer x.close()
	}
	type event struct {
		asked, got, releasing time.Time
	}
	var mu sync.Mutex
	var events []event
	res := contention{waits: make([][]time.Duration, workers), counts: make([]int, workers)}
	var holders atomic.Int64
	start := time.Now()
	end := start.Add(d)
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			ctx, cancel := context.WithDeadline(context.Background(), end)
			defer cancel()
			for ctx.Err() == nil {
				asked := time.Now()
				rel, err := xs[w].acquire(ctx, key)
				got := time.Now()
				res.waits[w] = append(res.waits[w], got.Sub(asked))
				if err != nil {
					return
				}
				if holders.Add(1) != 1 {
					atomic.AddInt64(&res.overlaps, 1)
				}
				holders.Add(-1)
				releasing := time.Now()
				rctx, rcancel := context.WithTimeout(context.Background(), 10*time.Second)
				_ = rel(rctx)
				rcancel()
				res.counts[w]++
				mu.Lock()
				events = append(events, event{asked, got, releasing})
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	res.duration = time.Since(start)
	slices.SortFunc(events, func(a, b event) int { return a.got.Compare(b.got) })
	for i := 1; i < len(events); i++ {
		if h := events[i].got.Sub(events[i-1].releasing); h > 0 {
			res.handoffs = append(res.handoffs, h)
		}
	}
	// FIFO: a grant overtakes when an earlier grant's request came after
	// its own and the two waits overlapped. Asking times are taken before
	// the request is sent, so a few near-ties are measurement noise.
	for i := 1; i < len(events); i++ {
		if events[i].asked.Before(events[i-1].asked) && events[i].asked.Before(events[i-1].got) &&
			events[i-1].asked.Sub(events[i].asked) > time.Millisecond {
			res.overtakes++
		}
	}
	res.acquisitions = len(events)
	return res, nil
}

// pct returns the p-th percentile of ds (p = 100: the maximum).
func pct(ds []time.Duration, p int) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	i := (len(s) - 1) * p / 100
	return s[i].Round(10 * time.Microsecond)
}

func nsPerOp(r testing.BenchmarkResult) time.Duration {
	return time.Duration(r.NsPerOp())
}
