//go:build linux

package etcdlock

import (
	"bufio"
	"context"
	"fmt"
	"net/http"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
	"unsafe"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/distlock/distlock/backend"
	"github.com/distlock/distlock/sandbox"
)

// A traceEv is one step of a hand-off, as traceHook reports it.
type traceEv struct {
	at   time.Time
	d    *Driver
	step string
	rev  int64
}

// etcdPid finds the etcd process serving addr (local provider), or 0.
func etcdPid(addr string) int {
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		b, _ := os.ReadFile("/proc/" + e.Name() + "/cmdline")
		if strings.Contains(string(b), "http://"+addr) && strings.Contains(string(b), "etcd") {
			return pid
		}
	}
	return 0
}

// cpuTicks is pid's user+system CPU time in clock ticks (1/100 s).
func cpuTicks(pid int) int64 {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0
	}
	s := string(b)
	f := strings.Fields(s[strings.LastIndexByte(s, ')')+2:])
	u, _ := strconv.ParseInt(f[11], 10, 64)
	k, _ := strconv.ParseInt(f[12], 10, 64)
	return u + k
}

// monoNow reads CLOCK_MONOTONIC, in seconds.
func monoNow() float64 {
	var ts syscall.Timespec
	_, _, _ = syscall.Syscall(syscall.SYS_CLOCK_GETTIME, 1, uintptr(unsafe.Pointer(&ts)), 0)
	return float64(ts.Sec) + float64(ts.Nsec)/1e9
}

// selfCPU is this process's user+system CPU time.
func selfCPU() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// metrics reads etcd's Prometheus metrics at addr.
func metrics(t *testing.T, addr string) map[string]float64 {
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
		name, val, ok := strings.Cut(l, " ")
		if !ok {
			continue
		}
		var f float64
		fmt.Sscan(val, &f)
		m[name] = f
	}
	return m
}

// TestHandoffTrace times every step of the hand-offs of 8 contending
// drivers on one key for 5 s (DISTLOCK_TRACE=1): it logs the hand-offs
// (from the release's start to the next grant, as internal/measure counts
// them) by what made the waiter take the lock (a watch event "wdel", a
// recheck, a read after the watch started), the slowest ones step by step,
// etcd's disk and watch metrics over the run, and etcd's and the clients'
// CPU time per acquisition (docs/etcd.md, "The hand-off tail").
func TestHandoffTrace(t *testing.T) {
	if os.Getenv("DISTLOCK_TRACE") == "" {
		t.Skip("DISTLOCK_TRACE not set")
	}
	// DISTLOCK_TRACE_ADDR: trace against a running etcd (a stock one, say)
	// instead of a sandbox member.
	addr := os.Getenv("DISTLOCK_TRACE_ADDR")
	if addr == "" {
		g := sandbox.StartT(t, sandbox.Spec{Kind: sandbox.Etcd})
		addr = g.Addrs()[0]
	}
	mono0, wall0 := monoNow(), time.Now()
	var mu sync.Mutex
	var evs []traceEv
	traceHook = func(d *Driver, step string, rev int64) {
		now := time.Now()
		mu.Lock()
		evs = append(evs, traceEv{now, d, step, rev})
		mu.Unlock()
	}
	defer func() { traceHook = nil }()
	ctx := context.Background()
	var ds []*Driver
	// DISTLOCK_TRACE_DRIVERS: how many drivers contend (default 8).
	drivers := 8
	if n, _ := strconv.Atoi(os.Getenv("DISTLOCK_TRACE_DRIVERS")); n > 0 {
		drivers = min(n, 256)
	}
	for range drivers {
		cli, err := clientv3.New(clientv3.Config{Endpoints: []string{addr}, DialTimeout: 10 * time.Second, Logger: zap.NewNop()})
		if err != nil {
			t.Fatal(err)
		}
		defer cli.Close()
		d, err := New(cli, &Options{Prefix: "trace", TTL: 10 * time.Second})
		if err != nil {
			t.Fatal(err)
		}
		defer d.Close()
		ds = append(ds, d)
	}
	// DISTLOCK_TRACE_WATCHERS=N: N more clients watch the lock's range
	// without waiting, to price the watch events each release sends.
	if n, _ := strconv.Atoi(os.Getenv("DISTLOCK_TRACE_WATCHERS")); n > 0 {
		wctx, stop := context.WithCancel(ctx)
		defer stop()
		for range min(n, 64) {
			cli, err := clientv3.New(clientv3.Config{Endpoints: []string{addr}, DialTimeout: 10 * time.Second, Logger: zap.NewNop()})
			if err != nil {
				t.Fatal(err)
			}
			defer cli.Close()
			wch := cli.Watch(wctx, lockRange(ds[0].prefix, "k"), clientv3.WithPrefix(), clientv3.WithFilterPut())
			go func() {
				for range wch {
				}
			}()
		}
	}
	// warm up
	for _, d := range ds {
		g, err := d.Wait(ctx, backend.Request{Key: "k", Owner: "o", TTL: 10 * time.Second})
		if err != nil {
			t.Fatal(err)
		}
		_ = g.Lock.Release(ctx)
	}
	mu.Lock()
	evs = nil
	mu.Unlock()
	before := metrics(t, addr)
	pid := etcdPid(addr)
	srvBefore, cliBefore := cpuTicks(pid), selfCPU()
	end := time.Now().Add(5 * time.Second)
	var wg sync.WaitGroup
	for _, d := range ds {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for time.Now().Before(end) {
				g, err := d.Wait(ctx, backend.Request{Key: "k", Owner: "o", TTL: 10 * time.Second})
				if err != nil {
					t.Error(err)
					return
				}
				_ = g.Lock.Release(ctx)
			}
		}()
	}
	wg.Wait()
	after := metrics(t, addr)
	srvCPU, cliCPU := time.Duration(cpuTicks(pid)-srvBefore)*10*time.Millisecond, selfCPU()-cliBefore
	traceHook = nil
	grants := 0
	for _, e := range evs {
		if e.step == "granted" {
			grants++
		}
	}
	grants = max(grants, 1)
	t.Logf("CPU per acquisition (%d acquisitions with a wait): etcd %v, clients %v; WAL fsyncs per acquisition %.2f, watch events sent %.2f",
		grants, srvCPU/time.Duration(grants), cliCPU/time.Duration(grants),
		(after["etcd_disk_wal_fsync_duration_seconds_count"]-before["etcd_disk_wal_fsync_duration_seconds_count"])/float64(grants),
		(after["etcd_debugging_mvcc_events_total"]-before["etcd_debugging_mvcc_events_total"])/float64(grants))
	for _, k := range slices.Sorted(func(yield func(string) bool) {
		for k := range after {
			if !yield(k) {
				return
			}
		}
	}) {
		if (strings.Contains(k, "fsync") || strings.Contains(k, "backend_commit") || strings.Contains(k, "watcher") || strings.Contains(k, "slow") || strings.Contains(k, "apply_duration") || strings.Contains(k, "events_total") || strings.Contains(k, "proposals_committed")) && after[k] != before[k] {
			t.Logf("%s %g", k, after[k]-before[k])
		}
	}
	// Hand-offs: each "granted" against the last rel-sent before it (as
	// internal/measure does), by what triggered the grant.
	var lastRel traceEv
	cause := map[*Driver]string{}
	byPath := map[string][]time.Duration{}
	var all []time.Duration
	var slow []string
	type handoff struct {
		from, to time.Time
		path     string
	}
	var handoffs []handoff
	for i, e := range evs {
		switch e.step {
		case "rel-sent":
			lastRel = e
		case "granted":
			if lastRel.d == nil {
				continue
			}
			path := cause[e.d]
			h := e.at.Sub(lastRel.at)
			byPath[path] = append(byPath[path], h)
			all = append(all, h)
			handoffs = append(handoffs, handoff{lastRel.at, e.at, path})
			if h > 5*time.Millisecond && len(slow) < 15 {
				var b strings.Builder
				for _, x := range evs[max(0, i-12) : i+1] {
					fmt.Fprintf(&b, "\n   %8.3fms d%p %s %d", float64(x.at.Sub(lastRel.at).Microseconds())/1000, x.d, x.step, x.rev)
				}
				slow = append(slow, fmt.Sprintf("hand-off %v via %s:%s", h, path, b.String()))
			}
			cause[e.d] = ""
		case "wdel", "recheck", "created-reread":
			cause[e.d] = e.step
		}
	}
	q := func(ds []time.Duration) string {
		slices.Sort(ds)
		if len(ds) == 0 {
			return "-"
		}
		return fmt.Sprintf("n=%d p50=%v p90=%v p99=%v max=%v", len(ds), ds[len(ds)/2], ds[len(ds)*9/10], ds[len(ds)*99/100], ds[len(ds)-1])
	}
	if out := os.Getenv("DISTLOCK_TRACE_OUT"); out != "" {
		// One line per hand-off: its start (the release's request) and end
		// (the grant) on CLOCK_MONOTONIC in seconds, as `perf record -k
		// mono` stamps etcd's fdatasyncs, and what granted it.
		var b strings.Builder
		for _, h := range handoffs {
			fmt.Fprintf(&b, "%.6f %.6f %s\n", mono0+h.from.Sub(wall0).Seconds(), mono0+h.to.Sub(wall0).Seconds(), h.path)
		}
		if err := os.WriteFile(out, []byte(b.String()), 0o644); err != nil {
			t.Fatal(err)
		}
		// And every step: time, driver, step, revision.
		b.Reset()
		for _, e := range evs {
			fmt.Fprintf(&b, "%.6f %p %s %d\n", mono0+e.at.Sub(wall0).Seconds(), e.d, e.step, e.rev)
		}
		if err := os.WriteFile(out+".steps", []byte(b.String()), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	t.Logf("all: %s", q(all))
	for p, ds := range byPath {
		t.Logf("via %s: %s", p, q(ds))
	}
	for _, s := range slow {
		t.Log(s)
	}
}
