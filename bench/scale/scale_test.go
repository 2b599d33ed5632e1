// Package scale measures how distlock's cost grows with the work (issue
// #17): leases held by one Locker (client memory per lease, renewal
// traffic, CPU, renewal rounds) and acquisitions per second with many
// clients on many keys, on every store, with servers from the sandbox.
//
//	go test ./scale -run TestScale -v               # small: minutes
//	go test ./scale -run TestScale -v -scale.full   # the curves of docs/benchmarks/scale.md
package scale

import (
	"context"
	"encoding/csv"
	"errors"
	"flag"
	"fmt"
	"os"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/distlock/distlock"
)

var (
	full       = flag.Bool("scale.full", false, "the full curves: 1k, 10k and 100k leases; 1, 8, 64 and 256 clients")
	storesFlag = flag.String("scale.stores", "mem,redis,mariadb,etcd,zookeeper", "the stores to measure, comma-separated")
	ttlFlag    = flag.Duration("scale.ttl", 4*time.Second, "the lease TTL: renewals every TTL/3 (4 s: a stock ZooKeeper grants no shorter session)")
	csvFlag    = flag.String("scale.csv", "", "also write the figures as CSV to this file")
	windowFlag = flag.Duration("scale.window", 0, "how long renewals are watched (0: TTL, or 2×TTL with -scale.full)")
	sizesFlag  = flag.String("scale.sizes", "", "lease counts to hold, comma-separated, instead of the store's (e.g. 100000)")
	noClients  = flag.Bool("scale.noclients", false, "skip the acquisition curve (clients)")
	zkWatch    = flag.Bool("scale.zkwatch", true, "ZooKeeper: renew with zklock.Options.WatchRenewals (a Sync and one read per round for the session, plus one read per changed node); false: a Sync and one read per lease")
)

// runFor is how long each acquisition curve point runs (after a warm-up),
// and each bare round-trip baseline beside it.
func runFor() time.Duration {
	if *full {
		return 3 * time.Second
	}
	return time.Second
}

func clientCounts() []int {
	if *full {
		return []int{1, 8, 64, 256}
	}
	return []int{1, 8}
}

// window is how long renewals are watched while n leases are held.
func window() time.Duration {
	if *windowFlag > 0 {
		return *windowFlag
	}
	if *full {
		return 2 * *ttlFlag
	}
	return *ttlFlag
}

// TestScale runs every store's curves and prints them as tables (and CSV
// with -scale.csv). Where a store stops keeping up (leases in doubt or
// lost, releases abandoned by Close) the tables say so: those are the
// figures, not failures.
func TestScale(t *testing.T) {
	if testing.Short() {
		t.Skip("short mode")
	}
	want := strings.Split(*storesFlag, ",")
	var held []heldResult
	var acq []clientsResult
	for _, s := range stores {
		if !slices.Contains(want, s.name) {
			continue
		}
		t.Run(s.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
			stop, err := s.start(ctx)
			cancel()
			if err != nil {
				t.Fatalf("start %s: %v", s.name, err)
			}
			defer func() {
				if err := stop(); err != nil {
					t.Errorf("stop %s: %v", s.name, err)
				}
			}()
			counts := s.held(*full)
			if *sizesFlag != "" {
				counts = nil
				for f := range strings.SplitSeq(*sizesFlag, ",") {
					n, err := strconv.Atoi(f)
					if err != nil {
						t.Fatalf("-scale.sizes: %v", err)
					}
					counts = append(counts, n)
				}
			}
			for _, n := range counts {
				r, err := measureHeld(s, n)
				if err != nil {
					t.Errorf("%s, %d leases: %v", s.name, n, err)
					continue
				}
				t.Logf("%s", r.line())
				held = append(held, r)
			}
			ran := false // the capped count was measured
			for _, k := range clientCounts() {
				if *noClients {
					break
				}
				if s.maxClients > 0 && k > s.maxClients {
					t.Logf("%s: %d clients capped at %d: %s", s.name, k, s.maxClients, s.clientLimit)
					if ran {
						continue
					}
					k = s.maxClients
				}
				ran = ran || k == s.maxClients
				r, err := measureClients(s, k)
				if err != nil {
					t.Fatalf("%s, %d clients: %v", s.name, k, err)
				}
				t.Logf("%s", r.line())
				acq = append(acq, r)
			}
		})
	}
	report(t, held, acq)
}

// heldResult is what one Locker holding n leases costs.
type heldResult struct {
	store string
	n     int

	acquire             time.Duration // all n acquisitions
	rateFirst, rateLast float64       // acquisitions/s over the first and the last tenth
	heapPerLease        float64       // HeapInuse delta / n after GC, bytes
	goroutinesPerLease  float64
	window              time.Duration
	renewalsPerSec      float64 // leases renewed / s (the Locker's distlock.renewals)
	renewFailed         int64
	doubts, lost        int64
	endDoubt, endLost   int     // leases in doubt, lost at the end of the window
	closeErr            error   // from Close, which releases every lease
	failed              int     // acquisitions that failed
	firstFail           string  // the first failure
	load                string  // /proc/loadavg (1 and 5 min) at the end of the window
	notReleased         int     // releases that failed in Close (its joined error)
	serverOpsPerSec     float64 // -1: no server
	cpuPerSec           float64 // process CPU seconds per second (1 = one core)
	cpuPerRenewal       time.Duration
	rounds              int
	leasesPerRound      float64
	roundP50, roundMax  time.Duration
	release             time.Duration // Close: every lease released
	serverOpsPerRenewal float64
	counterName         string
	conns               int // the client's open server connections at most, after acquiring and after the window (-1: not known)
}

func (r heldResult) line() string {
	return fmt.Sprintf("%s n=%d: acquire %v (%.0f/s first tenth, %.0f/s last), heap %.0f B/lease, %.3f goroutines/lease, "+
		"%.0f renewals/s, %.0f server ops/s, cpu %.3f core, %v/renewal, %d rounds of %.0f, round p50 %v max %v, release %v; "+
		"renewal errors %d, in doubt %d, lost %d; at the end %d in doubt, %d lost; %d not released; Close: %s; load %s; %d acquisitions failed%s; connections %d",
		r.store, r.n, r.acquire.Round(time.Millisecond), r.rateFirst, r.rateLast, r.heapPerLease, r.goroutinesPerLease,
		r.renewalsPerSec, r.serverOpsPerSec, r.cpuPerSec, r.cpuPerRenewal, r.rounds, r.leasesPerRound,
		r.roundP50.Round(time.Microsecond), r.roundMax.Round(time.Microsecond), r.release.Round(time.Millisecond),
		r.renewFailed, r.doubts, r.lost, r.endDoubt, r.endLost, r.notReleased, firstErr(r.closeErr), r.load, r.failed, r.failure(), r.conns)
}

func (r heldResult) failure() string {
	if r.firstFail != "" {
		return ", the first: " + r.firstFail
	}
	return ""
}

// heapInuse returns HeapInuse and the goroutine count after a GC.
func heapInuse() (uint64, int) {
	runtime.GC()
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return ms.HeapInuse, runtime.NumGoroutine()
}

// cpuTime returns the process's user+system CPU time so far.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// measureHeld has one Locker take n leases on n keys, then watches them
// being renewed for window(), then closes the Locker (releasing them all).
func measureHeld(s *store, n int) (heldResult, error) {
	r := heldResult{store: s.name, n: n, window: window(), counterName: s.counter}
	ttl := *ttlFlag
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	m, mp := newMeter()
	c, err := s.open(ctx, ttl, mp)
	if err != nil {
		return r, err
	}
	closed := false
	defer func() {
		if !closed {
			c.Close()
		}
	}()
	prefix := fmt.Sprintf("scale/held/%d/%d/", n, time.Now().UnixNano())
	// Warm up: pools, sessions, scripts, the watchdog.
	if le, err := c.l.TryAcquire(ctx, prefix+"warm"); err != nil {
		return r, fmt.Errorf("warm-up: %w", err)
	} else if err := le.Release(ctx); err != nil {
		return r, fmt.Errorf("warm-up release: %w", err)
	}
	leases := make([]*distlock.Lease, n)
	heap0, g0 := heapInuse()

	var next, done, failed atomic.Int64
	var firstFail atomic.Pointer[error]
	var firstTenth, lastTenth atomic.Int64 // nanoseconds since start
	tenth := int64(max(n/10, 1))
	start := time.Now()
	var wg sync.WaitGroup
	errs := make(chan error, s.parallel)
	for range min(s.parallel, n) {
		wg.Go(func() {
			for {
				i := int(next.Add(1) - 1)
				if i >= n || ctx.Err() != nil {
					return
				}
				le, err := c.l.TryAcquire(ctx, prefix+strconv.Itoa(i))
				if err != nil {
					// The store failing under the load is a figure: count
					// it, and stop only if most attempts fail.
					if f := failed.Add(1); f > int64(n/2) {
						errs <- fmt.Errorf("%d of %d acquisitions failed, the last: %w", f, n, err)
						cancel()
						return
					}
					firstFail.CompareAndSwap(nil, &err)
				}
				leases[i] = le
				switch d := done.Add(1); d {
				case tenth:
					firstTenth.Store(int64(time.Since(start)))
				case int64(n) - tenth:
					lastTenth.Store(int64(time.Since(start)))
				}
			}
		})
	}
	wg.Wait()
	r.acquire = time.Since(start)
	select {
	case err := <-errs:
		return r, err
	default:
	}
	r.failed = int(failed.Load())
	if e := firstFail.Load(); e != nil {
		r.firstFail = (*e).Error()
	}
	r.rateFirst = float64(tenth) / time.Duration(firstTenth.Load()).Seconds()
	r.rateLast = float64(tenth) / (r.acquire - time.Duration(lastTenth.Load())).Seconds()

	r.conns = -1
	if c.conns != nil {
		r.conns = c.conns()
	}
	heap1, g1 := heapInuse()
	r.heapPerLease = (float64(heap1) - float64(heap0)) / float64(n)
	r.goroutinesPerLease = float64(g1-g0) / float64(n)

	// The window: renewals only.
	m.reset()
	ops0, hasOps, err := s.serverOps(ctx)
	if err != nil {
		return r, fmt.Errorf("server counter: %w", err)
	}
	cpu0, t0 := cpuTime(), time.Now()
	select {
	case <-time.After(r.window):
	case <-ctx.Done():
		return r, ctx.Err()
	}
	cpu1, el := cpuTime(), time.Since(t0)
	ops1, _, err := s.serverOps(ctx)
	if err != nil {
		return r, fmt.Errorf("server counter: %w", err)
	}
	renewed := m.renewed.Load()
	r.renewalsPerSec = float64(renewed) / el.Seconds()
	r.renewFailed, r.doubts, r.lost = m.renewFailed.Load(), m.doubts.Load(), m.losses.Load()
	r.serverOpsPerSec = -1
	if hasOps {
		r.serverOpsPerSec = float64(ops1-ops0) / el.Seconds()
		if renewed > 0 {
			r.serverOpsPerRenewal = float64(ops1-ops0) / float64(renewed)
		}
	}
	r.cpuPerSec = (cpu1 - cpu0).Seconds() / el.Seconds()
	if renewed > 0 {
		r.cpuPerRenewal = (cpu1 - cpu0) / time.Duration(renewed)
	}
	r.load = loadAvg()
	if c.conns != nil {
		r.conns = max(r.conns, c.conns())
	}
	rounds := m.renewalRounds()
	r.rounds = len(rounds)
	if len(rounds) > 0 {
		took := make([]time.Duration, len(rounds))
		total := 0
		for i, rd := range rounds {
			took[i], total = rd.took, total+rd.leases
		}
		slices.Sort(took)
		r.leasesPerRound = float64(total) / float64(len(rounds))
		r.roundP50, r.roundMax = took[len(took)/2], took[len(took)-1]
	}
	for _, le := range leases {
		if le == nil {
			continue
		}
		switch le.State() {
		case distlock.StateInDoubt:
			r.endDoubt++
		case distlock.StateHeld:
		default:
			r.endLost++
		}
	}
	t1 := time.Now()
	closed = true
	r.closeErr = c.l.Close()
	r.release = time.Since(t1)
	// Close reports each release that failed (a lock found gone is not
	// a failure).
	if j, ok := r.closeErr.(interface{ Unwrap() []error }); ok {
		r.notReleased = len(j.Unwrap())
	} else if r.closeErr != nil {
		r.notReleased = 1
	}
	if c.close != nil {
		c.close()
	}
	return r, nil
}

// clientsResult is the acquisition rate of k clients on many keys.
type clientsResult struct {
	store       string
	clients     int
	pingRate    float64 // bare round trips/s, the same clients (0: none)
	pairRate    float64 // acquire+release pairs/s
	p50, p99    time.Duration
	cpuPerPair  time.Duration
	keysTouched int
	load        string
}

func (r clientsResult) line() string {
	return fmt.Sprintf("%s %d clients: %.0f pairs/s (bare round trips %.0f/s), pair p50 %v p99 %v, cpu %v/pair",
		r.store, r.clients, r.pairRate, r.pingRate, r.p50.Round(time.Microsecond), r.p99.Round(time.Microsecond), r.cpuPerPair)
}

// keysPerClient is how many keys each client cycles over: every pair is
// on a key no other client uses, and each key was taken once before.
const keysPerClient = 16

// measureClients has k clients, each its own Locker, driver and store
// client, take and release keys of their own for runFor(); before that, the
// same clients make bare round trips for as long, as the baseline.
func measureClients(s *store, k int) (clientsResult, error) {
	r := clientsResult{store: s.name, clients: k, keysTouched: k * keysPerClient}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	cs := make([]*client, k)
	defer func() {
		var wg sync.WaitGroup
		for _, c := range cs {
			if c != nil {
				wg.Go(c.Close)
			}
		}
		wg.Wait()
	}()
	if err := parallel(ctx, k, 16, func(i int) error {
		var err error
		cs[i], err = s.open(ctx, *ttlFlag, nil)
		return err
	}); err != nil {
		return r, fmt.Errorf("open: %w", err)
	}
	prefix := fmt.Sprintf("scale/clients/%d/%d/", k, time.Now().UnixNano())
	key := func(c, j int) string { return prefix + strconv.Itoa(c) + "/" + strconv.Itoa(j%keysPerClient) }
	pair := func(ctx context.Context, c, j int) error {
		le, err := cs[c].l.Acquire(ctx, key(c, j))
		if err != nil {
			return err
		}
		return le.Release(ctx)
	}
	// Warm-up: every key once (rows, container nodes, scripts, pools).
	if err := parallel(ctx, k, k, func(c int) error {
		for j := range keysPerClient {
			if err := pair(ctx, c, j); err != nil {
				return err
			}
		}
		return nil
	}); err != nil {
		return r, fmt.Errorf("warm-up: %w", err)
	}
	d := runFor()
	if cs[0].ping != nil {
		counts := make([]int, k)
		t0 := time.Now()
		if err := parallel(ctx, k, k, func(c int) error {
			for time.Since(t0) < d {
				if err := cs[c].ping(ctx); err != nil {
					return err
				}
				counts[c]++
			}
			return nil
		}); err != nil {
			return r, fmt.Errorf("round trip: %w", err)
		}
		r.pingRate = float64(sum(counts)) / time.Since(t0).Seconds()
	}
	lat := make([][]time.Duration, k)
	cpu0, t0 := cpuTime(), time.Now()
	if err := parallel(ctx, k, k, func(c int) error {
		for j := 0; time.Since(t0) < d; j++ {
			p0 := time.Now()
			if err := pair(ctx, c, j); err != nil {
				return err
			}
			lat[c] = append(lat[c], time.Since(p0))
		}
		return nil
	}); err != nil {
		return r, fmt.Errorf("pairs: %w", err)
	}
	el, cpu := time.Since(t0), cpuTime()-cpu0
	r.load = loadAvg()
	all := slices.Concat(lat...)
	if len(all) == 0 {
		return r, errors.New("no pair completed")
	}
	slices.Sort(all)
	r.pairRate = float64(len(all)) / el.Seconds()
	r.p50, r.p99 = all[len(all)/2], all[len(all)*99/100]
	r.cpuPerPair = cpu / time.Duration(len(all))
	return r, nil
}

// parallel runs f(0..n-1), at most width at a time, and returns the first
// error.
func parallel(ctx context.Context, n, width int, f func(i int) error) error {
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	sem := make(chan struct{}, width)
	var wg sync.WaitGroup
	for i := range n {
		select {
		case sem <- struct{}{}:
		case <-ctx.Done():
		}
		if ctx.Err() != nil {
			break
		}
		wg.Go(func() {
			defer func() { <-sem }()
			if err := f(i); err != nil {
				cancel(err)
			}
		})
	}
	wg.Wait()
	return context.Cause(ctx)
}

// firstErr shortens a joined error to its first part and the count.
func firstErr(err error) string {
	if err == nil {
		return "nil"
	}
	if j, ok := err.(interface{ Unwrap() []error }); ok && len(j.Unwrap()) > 1 {
		return fmt.Sprintf("%v (and %d more)", j.Unwrap()[0], len(j.Unwrap())-1)
	}
	return err.Error()
}

// loadAvg returns the machine's 1- and 5-minute load averages.
func loadAvg() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "?"
	}
	f := strings.Fields(string(b))
	if len(f) < 2 {
		return "?"
	}
	return f[0] + " " + f[1]
}

func sum(xs []int) int {
	t := 0
	for _, x := range xs {
		t += x
	}
	return t
}

// report prints the tables (Markdown, as in docs/benchmarks/scale.md) and
// writes the CSV.
func report(t *testing.T, held []heldResult, acq []clientsResult) {
	var b strings.Builder
	p := func(format string, args ...any) { fmt.Fprintf(&b, format, args...) }
	p("\nLeases held by one Locker (TTL %v, renewals every TTL/3, window %v):\n\n", *ttlFlag, window())
	p("| store | leases | heap/lease | goroutines/lease | acquire all | acq/s first tenth | acq/s last tenth | renewals/s | server ops/s | ops/renewal | CPU (cores) | CPU/renewal | rounds | leases/round | round p50 | round max | in doubt | lost | failed acq. | release all | not released | load |\n")
	p("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|\n")
	for _, r := range held {
		ops, per := "–", "–"
		if r.serverOpsPerSec >= 0 {
			ops, per = fmt.Sprintf("%.0f", r.serverOpsPerSec), fmt.Sprintf("%.2f", r.serverOpsPerRenewal)
		}
		p("| %s | %d | %.0f B | %.3f | %v | %.0f | %.0f | %.0f | %s | %s | %.3f | %v | %d | %.0f | %v | %v | %d | %d | %d | %v | %d | %s |\n",
			r.store, r.n, r.heapPerLease, r.goroutinesPerLease, r.acquire.Round(time.Millisecond), r.rateFirst, r.rateLast,
			r.renewalsPerSec, ops, per, r.cpuPerSec, r.cpuPerRenewal.Round(100*time.Nanosecond), r.rounds, r.leasesPerRound,
			r.roundP50.Round(10*time.Microsecond), r.roundMax.Round(10*time.Microsecond), r.doubts, int64(r.endLost),
			r.failed, r.release.Round(time.Millisecond), r.notReleased, r.load)
	}
	p("\nAcquisitions with k clients (each its own Locker, driver and store client) on keys of their own, %v per point:\n\n", runFor())
	p("| store | clients | pairs/s | × 1 client | bare round trips/s | pairs per round trip | pair p50 | pair p99 | CPU/pair | load |\n")
	p("|---|---:|---:|---:|---:|---:|---:|---:|---:|---|\n")
	one := map[string]float64{}
	for _, r := range acq {
		if r.clients == 1 {
			one[r.store] = r.pairRate
		}
		scale, ratio := "–", "–"
		if one[r.store] > 0 {
			scale = fmt.Sprintf("%.2f", r.pairRate/one[r.store])
		}
		if r.pingRate > 0 {
			ratio = fmt.Sprintf("%.3f", r.pairRate/r.pingRate)
		}
		ping := "–"
		if r.pingRate > 0 {
			ping = fmt.Sprintf("%.0f", r.pingRate)
		}
		p("| %s | %d | %.0f | %s | %s | %s | %v | %v | %v | %s |\n", r.store, r.clients, r.pairRate, scale, ping, ratio,
			r.p50.Round(time.Microsecond), r.p99.Round(time.Microsecond), r.cpuPerPair.Round(100*time.Nanosecond), r.load)
	}
	fmt.Print(b.String())
	if *csvFlag == "" {
		return
	}
	f, err := os.Create(*csvFlag)
	if err != nil {
		t.Fatal(err)
	}
	w := csv.NewWriter(f)
	_ = w.Write([]string{"table", "store", "n", "heap_per_lease_b", "goroutines_per_lease", "acquire_s", "acq_rate_first", "acq_rate_last",
		"renewals_per_s", "server_ops_per_s", "ops_per_renewal", "cpu_cores", "cpu_per_renewal_us", "rounds", "leases_per_round",
		"round_p50_ms", "round_max_ms", "in_doubt", "lost", "release_s", "not_released", "load"})
	ff := func(v float64) string { return strconv.FormatFloat(v, 'f', 3, 64) }
	for _, r := range held {
		_ = w.Write([]string{"held", r.store, strconv.Itoa(r.n), ff(r.heapPerLease), ff(r.goroutinesPerLease), ff(r.acquire.Seconds()),
			ff(r.rateFirst), ff(r.rateLast), ff(r.renewalsPerSec), ff(r.serverOpsPerSec), ff(r.serverOpsPerRenewal), ff(r.cpuPerSec),
			ff(float64(r.cpuPerRenewal) / 1e3), strconv.Itoa(r.rounds), ff(r.leasesPerRound),
			ff(float64(r.roundP50) / 1e6), ff(float64(r.roundMax) / 1e6), strconv.FormatInt(r.doubts, 10),
			strconv.FormatInt(int64(r.endLost), 10), ff(r.release.Seconds()), strconv.Itoa(r.notReleased), r.load})
	}
	_ = w.Write([]string{"table", "store", "clients", "pairs_per_s", "ping_per_s", "pair_p50_ms", "pair_p99_ms", "cpu_per_pair_us", "load"})
	for _, r := range acq {
		_ = w.Write([]string{"clients", r.store, strconv.Itoa(r.clients), ff(r.pairRate), ff(r.pingRate),
			ff(float64(r.p50) / 1e6), ff(float64(r.p99) / 1e6), ff(float64(r.cpuPerPair) / 1e3), r.load})
	}
	w.Flush()
	if err := errors.Join(w.Error(), f.Close()); err != nil {
		t.Fatal(err)
	}
}
