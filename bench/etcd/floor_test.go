package etcdbench

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"
	"golang.org/x/sys/unix"

	"github.com/distlock/distlock/bench/internal/lockbench"
	"github.com/distlock/distlock/bench/internal/measure"
)

// floorPrefix is the range of the floor locks' keys: one watch of it per
// contender, opened before the run, sees every lock of the floor.
const floorPrefix = "bench/floor/"

// floorContender is the minimal correct queue lock on bare clientv3, the
// floor of what any etcd lock can do for this workload: one key per
// contender (its lease's ID, reused every time, as concurrency.Mutex
// does), put on the lease in the same transaction that reads the keys
// ahead of it; the grant is the watch event of the last of those keys'
// deletion (no key older than ours can be created later, so the keys
// ahead only ever go), with no request between a release and the next
// grant; the release is one DeleteRange. The watch covers every floor key
// and is opened when the contender is made, before any write of the run,
// so etcd has it synced when the clock starts (a watch created while
// writes go on may see its events only at etcd's next 100 ms resync; see
// docs/etcd.md). Every release is sent to every contender's watch: no
// event filtering beyond WithFilterPut.
//
// With early set (the "floor-pre" variant), a holder enqueues its next
// request (a second key, the two names alternating) before it releases, so
// that its enqueue's write is never in flight when the next holder
// releases: each hand-off is then the release's write alone. No lock API
// can do that for a caller that has not asked again yet; it isolates the
// cost of the re-enqueue coinciding with the release (docs/etcd.md,
// "The hand-off floor").
type floorContender struct {
	cli    *clientv3.Client
	lease  clientv3.LeaseID
	stopKA context.CancelFunc
	wch    clientv3.WatchChan
	early  bool
	read   bool // floor-read: read the queue when it becomes second in line

	slot int        // the name slot of the next enqueue (early: alternating)
	next *floorTurn // early: our enqueued next request, if any
	// granted is when the last Acquire's wait ended: before floor-pre's
	// enqueue of its next request, which is part of its hold.
	granted time.Time
}

// A floorTurn is one enqueued request: our key, its create revision, the
// keys ahead of it when it was put, and the revision of that read.
type floorTurn struct {
	key   string
	rev   int64
	ahead []string
}

func newFloor() (measure.Contender, error)    { return makeFloor("floor", false, false) }
func newFloorPre() (measure.Contender, error) { return makeFloor("floor-pre", true, false) }

// newFloorRead is the floor with the one read per acquisition that
// etcdlock's waiter makes (it follows only the two keys just ahead of its
// own): a serializable read of its own key and of the keys just ahead,
// sent when a deletion leaves one key ahead of it (it is second in line)
// and waited for before it goes on waiting.
func newFloorRead() (measure.Contender, error) { return makeFloor("floor-read", false, true) }

func makeFloor(lib string, early, read bool) (measure.Contender, error) {
	cli, err := newClient(lib)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	lg, err := cli.Grant(ctx, int64(leaseTTL/time.Second))
	if err != nil {
		cli.Close()
		return nil, err
	}
	kactx, stopKA := context.WithCancel(context.Background())
	ka, err := cli.KeepAlive(kactx, lg.ID)
	if err != nil {
		stopKA()
		cli.Close()
		return nil, err
	}
	go func() {
		for range ka {
		}
	}()
	wch := cli.Watch(kactx, floorPrefix, clientv3.WithPrefix(), clientv3.WithFilterPut(), clientv3.WithCreatedNotify())
	select {
	case wr := <-wch:
		if !wr.Created {
			err = fmt.Errorf("floor: watch: no creation notice: %v", wr.Err())
		}
	case <-ctx.Done():
		err = ctx.Err()
	}
	if err != nil {
		stopKA()
		cli.Close()
		return nil, err
	}
	return &floorContender{cli: cli, lease: lg.ID, stopKA: stopKA, wch: wch, early: early, read: read}, nil
}

// enqueue puts a key of ours in key's queue (name slot slot) and reads the
// keys ahead of it in the same transaction.
func (c *floorContender) enqueue(ctx context.Context, key string, slot int) (*floorTurn, error) {
	rng := floorPrefix + key + "/"
	me := fmt.Sprintf("%s%x.%d", rng, c.lease, slot)
	resp, err := c.cli.Txn(ctx).Then(
		clientv3.OpPut(me, "", clientv3.WithLease(c.lease)),
		clientv3.OpGet(rng, clientv3.WithPrefix(), clientv3.WithKeysOnly()),
	).Commit()
	if err != nil {
		return nil, err
	}
	t := &floorTurn{key: me, rev: resp.Header.Revision}
	for _, kv := range resp.Responses[1].GetResponseRange().Kvs {
		if kv.CreateRevision < t.rev {
			t.ahead = append(t.ahead, string(kv.Key))
		}
	}
	return t, nil
}

// await waits until no key is ahead of t's: every deletion after t's read
// comes through the contender's watch (opened before it), in revision
// order; older events, left from earlier turns, are skipped.
func (c *floorContender) await(ctx context.Context, t *floorTurn) error {
	for len(t.ahead) > 0 {
		select {
		case wr, ok := <-c.wch:
			if !ok || wr.Err() != nil {
				return fmt.Errorf("floor: watch ended: %v", wr.Err())
			}
			for _, ev := range wr.Events {
				if ev.Type != mvccpb.DELETE || ev.Kv.ModRevision <= t.rev {
					continue
				}
				if string(ev.Kv.Key) == t.key {
					return errors.New("floor: our key was deleted while waiting")
				}
				before := len(t.ahead)
				t.ahead = slices.DeleteFunc(t.ahead, func(k string) bool { return k == string(ev.Kv.Key) })
				if c.read && before == 2 && len(t.ahead) == 1 {
					rng := t.key[:strings.LastIndexByte(t.key, '/')+1]
					if _, err := c.cli.Txn(ctx).Then(
						clientv3.OpGet(t.key, clientv3.WithKeysOnly(), clientv3.WithSerializable()),
						clientv3.OpGet(rng, clientv3.WithPrefix(), clientv3.WithKeysOnly(), clientv3.WithSerializable(),
							clientv3.WithMaxCreateRev(t.rev-1), clientv3.WithLimit(2),
							clientv3.WithSort(clientv3.SortByCreateRevision, clientv3.SortDescend)),
					).Commit(); err != nil {
						return err
					}
				}
			}
		case <-ctx.Done():
			_, _ = c.cli.Delete(context.WithoutCancel(ctx), t.key)
			return ctx.Err()
		}
	}
	return nil
}

func (c *floorContender) Acquire(ctx context.Context, key string) (func(context.Context) error, error) {
	t := c.next
	c.next = nil
	if t == nil || !c.early {
		var err error
		if t, err = c.enqueue(ctx, key, c.slot); err != nil {
			return nil, err
		}
		if c.early {
			c.slot ^= 1
		}
	}
	if err := c.await(ctx, t); err != nil {
		return nil, err
	}
	c.granted = time.Now()
	if c.early {
		// Holding: enqueue the next request now, under the other name.
		next, err := c.enqueue(ctx, key, c.slot)
		if err != nil {
			_, _ = c.cli.Delete(context.WithoutCancel(ctx), t.key)
			return nil, err
		}
		c.next, c.slot = next, c.slot^1
	}
	return func(ctx context.Context) error {
		resp, err := c.cli.Delete(ctx, t.key)
		if err == nil && resp.Deleted == 0 {
			err = errors.New("floor: release: our key was gone")
		}
		return err
	}, nil
}

func (c *floorContender) grantedAt() time.Time { return c.granted }

func (c *floorContender) Close() {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if c.next != nil {
		_, _ = c.cli.Delete(ctx, c.next.key)
	}
	_, _ = c.cli.Revoke(ctx, c.lease)
	c.stopKA()
	_ = c.cli.Close()
}

// opLog records, while set, the time of every unary request the
// libraries' clients send (see newClient) and every grant and release of
// the contended runs (see timed), for the hand-off analysis of TestFloor.
type opLog struct {
	mu     sync.Mutex
	ops    map[string][]op
	grants map[string][]grantTimes
}

// An op is one request: a write that enqueues ("put"), one that deletes
// ("del"), or a read.
type op struct {
	kind       string
	sent, done time.Time
}

type grantTimes struct{ got, releasing, released time.Time }

func (l *opLog) addOp(lib, kind string, sent, done time.Time) {
	l.mu.Lock()
	l.ops[lib] = append(l.ops[lib], op{kind, sent, done})
	l.mu.Unlock()
}

// timed wraps a library so that its grants are logged in log.
func timed(lib measure.Library, log *opLog) measure.Library {
	return measure.Library{Name: lib.Name, Make: func() (measure.Contender, error) {
		x, err := lib.Make()
		if err != nil {
			return nil, err
		}
		return timedContender{x, lib.Name, log}, nil
	}}
}

type timedContender struct {
	measure.Contender
	lib string
	log *opLog
}

func (t timedContender) Acquire(ctx context.Context, key string) (func(context.Context) error, error) {
	release, err := t.Contender.Acquire(ctx, key)
	if err != nil {
		return nil, err
	}
	got := time.Now()
	if g, ok := t.Contender.(interface{ grantedAt() time.Time }); ok {
		got = g.grantedAt()
	}
	return func(ctx context.Context) error {
		r := time.Now()
		err := release(ctx)
		t.log.mu.Lock()
		t.log.grants[t.lib] = append(t.log.grants[t.lib], grantTimes{got, r, time.Now()})
		t.log.mu.Unlock()
		return err
	}, nil
}

// floorLibraries are TestFloor's contenders, in rotating order.
var floorLibraries = []measure.Library{
	{Name: "distlock", Make: newDistlock},
	{Name: "etcdlock", Make: newDriver},
	{Name: "floor", Make: newFloor},
	{Name: "floor-pre", Make: newFloorPre},
	{Name: "floor-read", Make: newFloorRead},
}

// floorHandoffs is one library's hand-offs, pooled over rounds, by whether
// an enqueue (a put) of the same library was in flight when the release
// was sent.
type floorHandoffs struct {
	all, putInFlight, quiet, rel []time.Duration
	readLate                     []time.Duration // a read of the library was in flight when the release was answered
	spans                        []span          // every hand-off, for DISTLOCK_FLOOR_OUT
	acquisitions                 int             // counted in the hand-offs
	total                        int             // every grant of the runs
	dur                          time.Duration
	metrics                      map[string]float64 // etcd's counters, summed over the rounds
	requests                     map[string]int64   // unary requests by method, summed over the rounds
	srvCPU, cliCPU               time.Duration      // etcd's and this process's CPU time over the runs
}

// A span is one hand-off: from the release's request to the next grant.
type span struct {
	from, to    time.Time
	putInFlight bool
}

// analyze adds log's run of lib to h: the grants of the run's first
// contendFor (from the first grant on), so that none made while workers
// stop is counted (floor-pre's workers leave their next request queued
// when they stop, until they are closed).
func (h *floorHandoffs) analyze(log *opLog, lib string) {
	gs := slices.Clone(log.grants[lib])
	slices.SortFunc(gs, func(a, b grantTimes) int { return a.got.Compare(b.got) })
	if len(gs) > 0 {
		end := gs[0].got.Add(contendFor - 100*time.Millisecond)
		gs = slices.DeleteFunc(gs, func(g grantTimes) bool { return g.got.After(end) })
	}
	puts := slices.DeleteFunc(slices.Clone(log.ops[lib]), func(o op) bool { return o.kind != "put" })
	reads := slices.DeleteFunc(slices.Clone(log.ops[lib]), func(o op) bool { return o.kind != "read" })
	h.acquisitions += len(gs)
	for i, g := range gs {
		h.rel = append(h.rel, g.released.Sub(g.releasing))
		if i == 0 {
			continue
		}
		prev := gs[i-1]
		d := g.got.Sub(prev.releasing)
		if d <= 0 {
			continue
		}
		h.all = append(h.all, d)
		inFlight := slices.ContainsFunc(puts, func(p op) bool { return p.sent.Before(prev.releasing) && p.done.After(prev.releasing) })
		h.spans = append(h.spans, span{prev.releasing, g.got, inFlight})
		if slices.ContainsFunc(reads, func(r op) bool { return r.sent.Before(prev.released) && r.done.After(prev.released) }) {
			h.readLate = append(h.readLate, d)
		}
		if inFlight {
			h.putInFlight = append(h.putInFlight, d)
		} else {
			h.quiet = append(h.quiet, d)
		}
	}
}

// TestFloor measures distlock's 8-way hand-off beside the floor of any
// etcd queue lock (floorContender) and its variant that enqueues before
// it releases, in alternating rounds on one etcd member, and attributes
// the tail with etcd's own metrics read around each run
// (docs/etcd.md, "The hand-off floor"):
//
//	cd bench && DISTLOCK_SANDBOX=local go test -count=1 -v -run TestFloor ./etcd/
//
// DISTLOCK_FLOOR_ROUNDS sets the number of rounds (4) of 3 s each.
func TestFloor(t *testing.T) {
	if testing.Short() {
		t.Skip("short mode")
	}
	rounds := 4
	if n, _ := strconv.Atoi(os.Getenv("DISTLOCK_FLOOR_ROUNDS")); n > 0 {
		rounds = min(n, 20)
	}
	ctx := context.Background()
	mono0, wall0 := monoNow(), time.Now()
	pid := etcdPid()
	res := map[string]*floorHandoffs{}
	base := lockbench.UniqueKey("floor")
	for r := range rounds {
		for i, lib := range measure.Rotate(floorLibraries, r) {
			log := &opLog{ops: map[string][]op{}, grants: map[string][]grantTimes{}}
			ops.Store(log)
			requestCounts(lib.Name) // reset
			before := etcdMetrics(t)
			srv0, cli0 := procCPU(pid), selfCPU()
			c, err := measure.Contend(ctx, timed(lib, log), measure.Run{Key: fmt.Sprintf("%s-r%d-%d", base, r, i), Workers: contendWorkers, For: contendFor})
			srv1, cli1 := procCPU(pid), selfCPU()
			after := etcdMetrics(t)
			ops.Store(nil)
			if err != nil {
				t.Fatalf("%s: %v", lib.Name, err)
			}
			if c.Overlaps != 0 {
				t.Errorf("%s: two holders at once %d times", lib.Name, c.Overlaps)
			}
			h := res[lib.Name]
			if h == nil {
				h = &floorHandoffs{metrics: map[string]float64{}, requests: map[string]int64{}}
				res[lib.Name] = h
			}
			h.analyze(log, lib.Name)
			for m, n := range requestCounts(lib.Name) {
				h.requests[m] += n
			}
			h.dur += c.Duration
			h.srvCPU += srv1 - srv0
			h.cliCPU += cli1 - cli0
			h.total += c.Acquisitions
			for k, v := range after {
				h.metrics[k] += v - before[k]
			}
		}
	}
	var out strings.Builder
	p := func(format string, args ...any) { fmt.Fprintf(&out, format, args...) }
	ms := func(d time.Duration) string { return fmt.Sprintf("%.2f", d.Seconds()*1000) }
	q := func(ds []time.Duration) string {
		if len(ds) == 0 {
			return "-"
		}
		s := measure.Summarize(ds)
		return fmt.Sprintf("n=%d p50=%s p90=%s p99=%s max=%s ms", len(ds), ms(s.P50), ms(pct(ds, 0.9)), ms(s.P99), ms(s.Max))
	}
	p("%d workers on one key, %d alternating rounds of %v (hand-off: release sent -> next grant)\n", contendWorkers, rounds, contendFor)
	for _, lib := range floorLibraries {
		h := res[lib.Name]
		m := h.metrics
		n := float64(max(1, h.total))
		p("%s: %d acquisitions, %.0f/s\n", lib.Name, h.total, n/h.dur.Seconds())
		p("  hand-off            %s\n", q(h.all))
		p("  release             %s\n", q(h.rel))
		p("  put in flight (%2.0f%%) %s\n", 100*float64(len(h.putInFlight))/float64(max(1, len(h.all))), q(h.putInFlight))
		p("  no put in flight    %s\n", q(h.quiet))
		p("  read in flight at the release's answer (%.1f%%) %s\n", 100*float64(len(h.readLate))/float64(max(1, len(h.all))), q(h.readLate))
		var reqs []string
		for _, m := range slices.Sorted(maps.Keys(h.requests)) {
			reqs = append(reqs, fmt.Sprintf("%s %.2f", m, float64(h.requests[m])/n))
		}
		p("  requests per acquisition (setup included): %s\n", strings.Join(reqs, " "))
		p("  CPU per acquisition: etcd %v, clients %v (etcd found: %v)\n",
			(h.srvCPU / time.Duration(n)).Round(time.Microsecond), (h.cliCPU / time.Duration(n)).Round(time.Microsecond), pid > 0)
		p("  etcd: WAL fsyncs %.2f/acq, mean %.2f ms, over 1/2/4/8 ms: %s; proposals committed %.2f/acq, slow applies %g\n",
			m[walFsync+"_count"]/n, 1000*m[walFsync+"_sum"]/max(1, m[walFsync+"_count"]), over(m, walFsync),
			m["etcd_server_proposals_committed_total"]/n, m["etcd_server_slow_apply_total"])
		var watchMsgs float64
		for k, v := range m {
			if strings.HasPrefix(k, `grpc_server_msg_received_total{grpc_method="Watch"`) {
				watchMsgs += v
			}
		}
		p("  etcd: watch events sent %.2f/acq, watch requests received (creations and cancels) %.3f/acq\n",
			m["etcd_debugging_mvcc_events_total"]/n, watchMsgs/n)
		p("  etcd: backend commits %.1f/s, mean %.2f ms, %.2f%% of the run's time, over 1/2/4/8 ms: %s\n",
			m[backendCommit+"_count"]/h.dur.Seconds(), 1000*m[backendCommit+"_sum"]/max(1, m[backendCommit+"_count"]),
			100*m[backendCommit+"_sum"]/h.dur.Seconds(), over(m, backendCommit))
	}
	fmt.Print(out.String())
	t.Log("\n" + out.String())
	if path := os.Getenv("DISTLOCK_FLOOR_OUT"); path != "" {
		writeSpans(t, path, res, mono0, wall0)
	}
}

// writeSpans writes every hand-off to path, one line each: the library,
// its start and end on CLOCK_MONOTONIC in seconds (as `perf record -k
// mono` stamps etcd's system calls), whether a put was in flight; then the
// etcd process's pid and its open files by descriptor, to tell its WAL's
// fdatasyncs from bbolt's (testdata/floorperf.py lines them up).
func writeSpans(t *testing.T, path string, res map[string]*floorHandoffs, mono0 float64, wall0 time.Time) {
	var b strings.Builder
	mono := func(at time.Time) float64 { return mono0 + at.Sub(wall0).Seconds() }
	for _, lib := range floorLibraries {
		for _, s := range res[lib.Name].spans {
			fmt.Fprintf(&b, "H %s %.6f %.6f %v\n", lib.Name, mono(s.from), mono(s.to), s.putInFlight)
		}
	}
	if pid := etcdPid(); pid > 0 {
		fmt.Fprintf(&b, "PID %d\n", pid)
		ents, _ := os.ReadDir(fmt.Sprintf("/proc/%d/fd", pid))
		for _, e := range ents {
			if target, err := os.Readlink(fmt.Sprintf("/proc/%d/fd/%s", pid, e.Name())); err == nil {
				fmt.Fprintf(&b, "FD %s %s\n", e.Name(), target)
			}
		}
	}
	if err := os.WriteFile(path, []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
}

// etcdPid finds the sandbox member's process (local provider), or 0.
func etcdPid() int {
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		b, _ := os.ReadFile("/proc/" + e.Name() + "/cmdline")
		if strings.Contains(string(b), "http://"+addr) && strings.HasPrefix(filepath.Base(strings.SplitN(string(b), "\x00", 2)[0]), "etcd") {
			return pid
		}
	}
	return 0
}

// procCPU is pid's user+system CPU time (0 for pid 0).
func procCPU(pid int) time.Duration {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if pid == 0 || err != nil {
		return 0
	}
	s := string(b)
	f := strings.Fields(s[strings.LastIndexByte(s, ')')+2:])
	u, _ := strconv.ParseInt(f[11], 10, 64)
	k, _ := strconv.ParseInt(f[12], 10, 64)
	return time.Duration(u+k) * 10 * time.Millisecond // clock ticks of 1/100 s
}

// selfCPU is this process's user+system CPU time.
func selfCPU() time.Duration {
	var ru unix.Rusage
	_ = unix.Getrusage(unix.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// monoNow reads CLOCK_MONOTONIC, in seconds.
func monoNow() float64 {
	var ts unix.Timespec
	_ = unix.ClockGettime(unix.CLOCK_MONOTONIC, &ts)
	return float64(ts.Sec) + float64(ts.Nsec)/1e9
}

const (
	walFsync      = "etcd_disk_wal_fsync_duration_seconds"
	backendCommit = "etcd_disk_backend_commit_duration_seconds"
)

// over formats how many of histogram name's observations (a delta) were
// over 1, 2, 4 and 8 ms, as percentages.
func over(m map[string]float64, name string) string {
	total := max(1, m[name+"_count"])
	var s []string
	for _, le := range []string{"0.001", "0.002", "0.004", "0.008"} {
		s = append(s, fmt.Sprintf("%.2f%%", 100*(total-m[name+`_bucket{le="`+le+`"}`])/total))
	}
	return strings.Join(s, " ")
}

// pct is the q-quantile of ds (sorted in place).
func pct(ds []time.Duration, q float64) time.Duration {
	slices.Sort(ds)
	return ds[min(len(ds)-1, int(q*float64(len(ds))))]
}

// etcdMetrics reads the sandbox member's Prometheus metrics, by series.
func etcdMetrics(t *testing.T) map[string]float64 {
	resp, err := http.Get("http://" + addr + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	m := map[string]float64{}
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		l := sc.Text()
		if strings.HasPrefix(l, "#") {
			continue
		}
		if i := strings.LastIndexByte(l, ' '); i > 0 {
			if f, err := strconv.ParseFloat(l[i+1:], 64); err == nil {
				m[l[:i]] = f
			}
		}
	}
	return m
}
