package redisbench

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-redsync/redsync/v4"
	redsyncredis "github.com/go-redsync/redsync/v4/redis"
	"github.com/go-redsync/redsync/v4/redis/goredis/v9"
	"github.com/redis/go-redis/v9"

	"github.com/distlock/distlock"
	"github.com/distlock/distlock/backend"
	"github.com/distlock/distlock/bench/internal/lockbench"
	"github.com/distlock/distlock/bench/internal/measure"
	dlredis "github.com/distlock/distlock/redislock"
	dlredlock "github.com/distlock/distlock/redlock"
	"github.com/distlock/distlock/sandbox"
)

// TestPairs is the issue-17 comparison of the uncontended acquire+release
// pair, single node and Redlock (3 independent nodes), with the 8-way
// contended Redlock run: every library in one run, in rotating rounds, with
// ratios against the bare round trip (PING; for Redlock one PING to every
// node at once) and against the best peer, and the round trips, commands
// and bytes each pair costs, counted on the wire (a go-redis hook on every
// client, wrapping its connections) and in the servers (INFO
// commandstats). Servers have Debian's default settings
// (sandbox.Spec.Stock); clients are made as users make them:
// redis.NewClient(&redis.Options{Addr: a}).
//
//	cd bench && DISTLOCK_SANDBOX=local go test -run TestPairs -v ./redis/
//
// DISTLOCK_BENCH_ROUNDS (default 5), DISTLOCK_BENCH_PAIRS (pairs per
// library and round, default 400) and DISTLOCK_BENCH_CONTEND (each
// contended run, default 3s; 0 skips them) size it.
func TestPairs(t *testing.T) {
	if testing.Short() {
		t.Skip("short mode")
	}
	rounds := envInt("DISTLOCK_BENCH_ROUNDS", 5)
	pairs := envInt("DISTLOCK_BENCH_PAIRS", 400)
	contendFor := 3 * time.Second
	if v := os.Getenv("DISTLOCK_BENCH_CONTEND"); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil {
			t.Fatal(err)
		}
		contendFor = d
	}
	g := sandbox.StartT(t, sandbox.Spec{Kind: sandbox.Redis, Nodes: 3, Stock: true})
	three := g.Addrs()
	one := sandbox.StartT(t, sandbox.Spec{Kind: sandbox.Redis, Stock: true}).Addrs()[:1]

	var out strings.Builder
	p := func(format string, args ...any) { fmt.Fprintf(&out, format, args...) }
	p("%d rounds x %d pairs per library, order rotating; p50 over all pairs\n", rounds, pairs)

	single := []pairLib{
		{name: "PING", floor: true, make: pingLib},
		{name: "distlock", make: dlSingle(nil)},
		{name: "distlock-notify", make: dlSingle(&dlredis.Options{Wait: dlredis.WaitNotify})},
		{name: "redsync", make: redsyncLib},
		{name: "bsm/redislock", make: bsmLib},
	}
	redlock := []pairLib{
		{name: "PING x3", floor: true, make: pingLib},
		{name: "distlock", make: dlRedlock},
		{name: "redsync", make: redsyncLib},
	}
	for _, set := range []struct {
		title string
		addrs []string
		libs  []pairLib
	}{{"single node", one, single}, {"Redlock, 3 nodes", three, redlock}} {
		p("\n%s, uncontended acquire+release:\n", set.title)
		res, err := pairRounds(set.libs, set.addrs, rounds, pairs)
		if err != nil {
			t.Fatal(err)
		}
		floor := res[set.libs[0].name].p50()
		best := time.Duration(0)
		bestName := ""
		for _, lib := range set.libs[1:] {
			if strings.HasPrefix(lib.name, "distlock") {
				continue
			}
			if v := res[lib.name].p50(); best == 0 || v < best {
				best, bestName = v, lib.name
			}
		}
		p("  %-16s %9s %9s %8s %9s  %-22s %s\n", "library", "p50", "p90", "/floor", "/"+bestName, "per-round /"+bestName, "round trips (cmds) bytes sent/received per pair per node")
		for _, lib := range set.libs {
			r := res[lib.name]
			perRound := make([]string, len(r.rounds))
			for i := range r.rounds {
				perRound[i] = fmt.Sprintf("%.2f", float64(measure.Median(r.rounds[i]))/float64(measure.Median(res[bestName].rounds[i])))
			}
			p("  %-16s %9v %9v %8.2f %9.2f  %-22s %s\n", lib.name, r.p50().Round(time.Microsecond), r.p90().Round(time.Microsecond),
				float64(r.p50())/float64(floor), float64(r.p50())/float64(best), strings.Join(perRound, " "), r.trips)
		}
		for _, lib := range set.libs {
			if s := res[lib.name].server; s != "" {
				p("  %-16s server commands per pair per node: %s\n", lib.name, s)
			}
		}
	}

	if contendFor > 0 {
		p("\nRedlock, 3 nodes, %d workers (own clients each) on one key for %v, %d rotating rounds:\n", contendWorkers, contendFor, 2)
		libs := []measure.Library{
			{Name: "distlock", Make: func() (measure.Contender, error) { return dlRedlock(three, nil), nil }},
			{Name: "redsync", Make: func() (measure.Contender, error) { return redsyncLib(three, nil), nil }},
		}
		rs, err := measure.ContendRounds(context.Background(), libs, 2, measure.Run{Key: lockbench.UniqueKey("redlock-contended"), Workers: contendWorkers, For: contendFor, WarmUp: true})
		if err != nil {
			t.Fatal(err)
		}
		p("  %-10s %-16s %-12s %9s %9s %9s %10s\n", "library", "acq/s (rounds)", "dl/this", "hand p50", "hand p99", "wait max", "max share")
		for _, lib := range libs {
			c := rs[lib.Name].Pooled()
			rates, ours := rs[lib.Name].Rates(), rs["distlock"].Rates()
			var rateS, ratioS []string
			for i := range rates {
				rateS = append(rateS, fmt.Sprintf("%.0f", rates[i]))
				ratioS = append(ratioS, fmt.Sprintf("%.2f", ours[i]/max(rates[i], 1e-9)))
			}
			hand, wait := lockbench.Summarize(c.Handoffs), lockbench.Summarize(c.AllWaits())
			p("  %-10s %-16s %-12s %9v %9v %9v %9.2fx\n", lib.Name, strings.Join(rateS, " "), strings.Join(ratioS, " "), hand.P50, hand.P99, wait.Max, c.MaxShare())
		}
	}
	t.Log("\n" + out.String())
	if f := os.Getenv("DISTLOCK_BENCH_REPORT"); f != "" {
		if err := os.WriteFile(f, []byte(out.String()), 0o644); err != nil {
			t.Error(err)
		}
	}
}

func envInt(name string, def int) int {
	if v, err := strconv.Atoi(os.Getenv(name)); err == nil && v > 0 {
		return v
	}
	return def
}

// pairLib is one library of the uncontended comparison, over one or more
// nodes.
type pairLib struct {
	name  string
	floor bool
	// make returns a contender over clients of addrs, with hook on every
	// client (nil: none).
	make func(addrs []string, hook func(node int) redis.Hook) measure.Contender
}

// pairResult is what one library measured.
type pairResult struct {
	rounds [][]time.Duration
	trips  string // round trips, commands and bytes per pair, per node
	server string // server-side commands per pair per node (INFO commandstats)
}

func (r pairResult) all() []time.Duration { return slices.Concat(r.rounds...) }
func (r pairResult) p50() time.Duration   { return measure.Percentile(r.all(), 50) }
func (r pairResult) p90() time.Duration   { return measure.Percentile(r.all(), 90) }

// pairRounds times every library in rotating rounds, then counts one
// library at a time what a pair costs.
func pairRounds(libs []pairLib, addrs []string, rounds, pairs int) (map[string]*pairResult, error) {
	ctx := context.Background()
	xs := map[string]measure.Contender{}
	keys := map[string]string{}
	defer func() {
		for _, x := range xs {
			x.Close()
		}
	}()
	out := map[string]*pairResult{}
	for _, lib := range libs {
		xs[lib.name] = lib.make(addrs, nil)
		keys[lib.name] = lockbench.UniqueKey("pairs")
		if _, err := measure.Pairs(ctx, xs[lib.name], keys[lib.name], 10, 0); err != nil {
			return nil, fmt.Errorf("%s: warm-up: %w", lib.name, err)
		}
		out[lib.name] = &pairResult{}
	}
	for r := range rounds {
		for _, lib := range measure.Rotate(libs, r) {
			ds, err := measure.Pairs(ctx, xs[lib.name], keys[lib.name], pairs, 0)
			if err != nil {
				return nil, fmt.Errorf("%s: %w", lib.name, err)
			}
			out[lib.name].rounds = append(out[lib.name].rounds, ds)
		}
	}
	const counted = 100
	for _, lib := range libs {
		counters := make([]*countHook, len(addrs))
		for i := range counters {
			counters[i] = &countHook{}
		}
		x := lib.make(addrs, func(i int) redis.Hook { return counters[i] })
		key := lockbench.UniqueKey("count")
		if _, err := measure.Pairs(ctx, x, key, 3, 0); err != nil { // warm-up: connections, subscriptions, scripts
			x.Close()
			return nil, fmt.Errorf("%s: %w", lib.name, err)
		}
		before, err := commandStats(ctx, addrs)
		if err != nil {
			x.Close()
			return nil, err
		}
		for _, c := range counters {
			c.reset()
		}
		_, err = measure.Pairs(ctx, x, key, counted, 0)
		x.Close()
		if err != nil {
			return nil, fmt.Errorf("%s: %w", lib.name, err)
		}
		after, err := commandStats(ctx, addrs)
		if err != nil {
			return nil, err
		}
		var trips, server []string
		for i, c := range counters {
			trips = append(trips, fmt.Sprintf("%.2f (%.2f) %.0f/%.0f B", float64(c.trips.Load())/counted, float64(c.cmds.Load())/counted,
				float64(c.sent.Load())/counted, float64(c.received.Load())/counted))
			server = append(server, statsDiff(before[i], after[i], counted))
		}
		out[lib.name].trips = strings.Join(trips, " | ")
		if !lib.floor {
			out[lib.name].server = strings.Join(server, " | ")
		}
	}
	return out, nil
}

// countHook counts a client's round trips (a command, or a pipeline),
// commands, and the bytes its connections send and receive (every
// connection the client dials after the hook was added).
type countHook struct{ trips, cmds, sent, received atomic.Int64 }

func (h *countHook) reset() {
	h.trips.Store(0)
	h.cmds.Store(0)
	h.sent.Store(0)
	h.received.Store(0)
}

func (h *countHook) DialHook(next redis.DialHook) redis.DialHook {
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		c, err := next(ctx, network, addr)
		if err != nil {
			return nil, err
		}
		return &countConn{Conn: c, h: h}, nil
	}
}

// countConn counts the bytes of one connection into its hook.
type countConn struct {
	net.Conn
	h *countHook
}

func (c *countConn) Write(p []byte) (int, error) {
	n, err := c.Conn.Write(p)
	c.h.sent.Add(int64(n))
	return n, err
}

func (c *countConn) Read(p []byte) (int, error) {
	n, err := c.Conn.Read(p)
	c.h.received.Add(int64(n))
	return n, err
}

func (h *countHook) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		h.trips.Add(1)
		h.cmds.Add(1)
		return next(ctx, cmd)
	}
}

func (h *countHook) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		h.trips.Add(1)
		h.cmds.Add(int64(len(cmds)))
		return next(ctx, cmds)
	}
}

// commandStats reads every node's calls per command.
func commandStats(ctx context.Context, addrs []string) ([]map[string]int64, error) {
	out := make([]map[string]int64, len(addrs))
	for i, a := range addrs {
		c := redis.NewClient(&redis.Options{Addr: a})
		raw, err := c.Info(ctx, "commandstats").Result()
		_ = c.Close()
		if err != nil {
			return nil, err
		}
		m := map[string]int64{}
		for line := range strings.SplitSeq(raw, "\n") {
			name, rest, ok := strings.Cut(strings.TrimSpace(line), ":")
			if !ok || !strings.HasPrefix(name, "cmdstat_") {
				continue
			}
			v, _, _ := strings.Cut(strings.TrimPrefix(rest, "calls="), ",")
			n, _ := strconv.ParseInt(v, 10, 64)
			m[strings.TrimPrefix(name, "cmdstat_")] = n
		}
		out[i] = m
	}
	return out, nil
}

// statsDiff prints the commands run between two readings, per pair
// (leaving out INFO itself), top-level and inside scripts alike.
func statsDiff(before, after map[string]int64, pairs int) string {
	var parts []string
	var names []string
	for k := range after {
		names = append(names, k)
	}
	sort.Strings(names)
	for _, k := range names {
		if k == "info" || k == "client|setinfo" || k == "hello" {
			continue
		}
		if d := after[k] - before[k]; d > 0 {
			parts = append(parts, fmt.Sprintf("%s %.2f", k, float64(d)/float64(pairs)))
		}
	}
	return strings.Join(parts, ", ")
}

// userClient is a client made as a user makes one, with hook if not nil.
func userClient(a string, hook redis.Hook) *redis.Client {
	c := redis.NewClient(&redis.Options{Addr: a})
	if hook != nil {
		c.AddHook(hook)
	}
	return c
}

func clients(addrs []string, hook func(int) redis.Hook) []*redis.Client {
	cs := make([]*redis.Client, len(addrs))
	for i, a := range addrs {
		var h redis.Hook
		if hook != nil {
			h = hook(i)
		}
		cs[i] = userClient(a, h)
	}
	return cs
}

// universal returns cs as the []redis.UniversalClient redlock.New takes.
func universal(cs []*redis.Client) []redis.UniversalClient {
	us := make([]redis.UniversalClient, len(cs))
	for i, c := range cs {
		us[i] = c
	}
	return us
}

func closeAll(cs []*redis.Client) {
	for _, c := range cs {
		_ = c.Close()
	}
}

// pingLib: one PING per node, all nodes at once, as a "pair".
func pingLib(addrs []string, hook func(int) redis.Hook) measure.Contender {
	cs := clients(addrs, hook)
	return closer{measure.AcquireFunc(func(ctx context.Context, _ string) (func(context.Context) error, error) {
		var wg sync.WaitGroup
		errs := make([]error, len(cs))
		for i, c := range cs {
			if len(cs) == 1 {
				errs[i] = c.Ping(ctx).Err()
				break
			}
			wg.Go(func() { errs[i] = c.Ping(ctx).Err() })
		}
		wg.Wait()
		return func(context.Context) error { return nil }, errors.Join(errs...)
	}), func() { closeAll(cs) }}
}

// closer is a contender with a Close of its own.
type closer struct {
	measure.Contender
	close func()
}

func (c closer) Close() { c.close() }

// dlSingle: distlock over redislock.New on a client made by the user.
func dlSingle(opts *dlredis.Options) func([]string, func(int) redis.Hook) measure.Contender {
	return func(addrs []string, hook func(int) redis.Hook) measure.Contender {
		cs := clients(addrs[:1], hook)
		d, err := dlredis.New(cs[0], opts)
		if err != nil {
			panic(err)
		}
		return &lockbench.LockerContender{L: distlock.New(d, distlock.WithDefaultTTL(leaseTTL)), CloseClient: func() { closeAll(cs) }}
	}
}

// dlRedlock: distlock over redlock.New on one client per node.
func dlRedlock(addrs []string, hook func(int) redis.Hook) measure.Contender {
	cs := clients(addrs, hook)
	d, err := dlredlock.New(universal(cs), nil)
	if err != nil {
		panic(err)
	}
	return &lockbench.LockerContender{L: distlock.New(d, distlock.WithDefaultTTL(leaseTTL)), CloseClient: func() { closeAll(cs) }}
}

// redsyncLib: redsync with one pool per node (one node: its Mutex; three:
// its Redlock), its defaults, Acquire as redsyncC's.
func redsyncLib(addrs []string, hook func(int) redis.Hook) measure.Contender {
	cs := clients(addrs, hook)
	pools := make([]redsyncredis.Pool, len(cs))
	for i, c := range cs {
		pools[i] = goredis.NewPool(c)
	}
	return &redsyncMulti{redsyncC{rs: redsync.New(pools...)}, cs}
}

type redsyncMulti struct {
	redsyncC
	cs []*redis.Client
}

func (x *redsyncMulti) Close() { closeAll(x.cs) }

// bsmLib: bsm/redislock on one node.
func bsmLib(addrs []string, hook func(int) redis.Hook) measure.Contender {
	c := userClient(addrs[0], nil)
	if hook != nil {
		c.AddHook(hook(0))
	}
	x := newBSMOn(c)
	return x
}

// pairDriver returns a redislock driver on the sandbox node, closed with
// its client when b ends.
func pairDriver(b *testing.B) *dlredis.Driver {
	c := userClient(addr, nil)
	b.Cleanup(func() { _ = c.Close() })
	d, err := dlredis.New(c, nil)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = d.Close() })
	return d
}

// driverPairs times the driver alone: TryAcquire and Release of key on d,
// once per b.Loop.
func driverPairs(ctx context.Context, b *testing.B, d backend.Driver, key string) {
	for b.Loop() {
		g, err := d.TryAcquire(ctx, backend.Request{Key: key, Owner: "o", TTL: leaseTTL})
		if err != nil {
			b.Fatal(err)
		}
		if err := g.Lock.Release(ctx); err != nil {
			b.Fatal(err)
		}
	}
}

// contenderPairs times x's Acquire and release of key, once per b.Loop.
func contenderPairs(ctx context.Context, b *testing.B, x measure.Contender, key string) {
	for b.Loop() {
		rel, err := x.Acquire(ctx, key)
		if err != nil {
			b.Fatal(err)
		}
		if err := rel(ctx); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkPairLayers splits distlock's single-node pair: the driver
// alone (TryAcquire + Release on redislock.Driver), the Locker's
// TryAcquire, and its Acquire (what users and the harness call).
func BenchmarkPairLayers(b *testing.B) {
	ctx := context.Background()
	b.Run("driver-cancelctx", func(b *testing.B) {
		d := pairDriver(b)
		key := lockbench.UniqueKey("layers")
		b.ReportAllocs()
		for b.Loop() {
			ctx, cancel := context.WithCancelCause(ctx)
			g, err := d.TryAcquire(ctx, backend.Request{Key: key, Owner: "o", TTL: leaseTTL})
			if err != nil {
				b.Fatal(err)
			}
			cancel(nil)
			ctx, cancel = context.WithCancelCause(context.Background())
			if err := g.Lock.Release(ctx); err != nil {
				b.Fatal(err)
			}
			cancel(nil)
		}
	})
	b.Run("driver", func(b *testing.B) {
		d := pairDriver(b)
		key := lockbench.UniqueKey("layers")
		b.ReportAllocs()
		defer scriptTime(b)()
		driverPairs(ctx, b, d, key)
	})
	for _, try := range []bool{true, false} {
		name := "acquire"
		if try {
			name = "try"
		}
		b.Run(name, func(b *testing.B) {
			x := dlSingle(nil)([]string{addr}, nil).(*lockbench.LockerContender)
			defer x.Close()
			key := lockbench.UniqueKey("layers")
			b.ReportAllocs()
			for b.Loop() {
				var le *distlock.Lease
				var err error
				if try {
					le, err = x.L.TryAcquire(ctx, key)
				} else {
					le, err = x.L.Acquire(ctx, key)
				}
				if err != nil {
					b.Fatal(err)
				}
				if err := le.Release(ctx); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
	// The Locker's Acquire and Release with the ctx kinds the comparison
	// passes: a cancellable ctx (distlock-bench's uncontended pairs) and
	// one with a deadline (its contended and many-keys workers, whose
	// releases have a timeout), for the goroutine hand-offs they cost.
	// deadline-ctxtimeout: the same on a client with ContextTimeoutEnabled
	// (go-redis itself ends a call at its ctx's deadline: the driver runs
	// it on the caller's goroutine).
	// cancel-oncaller: a cancellable ctx with distlock.WithReleaseOnCaller
	// (the release's hand-off, measured).
	for _, kind := range []string{"cancel", "cancel-oncaller", "deadline", "deadline-ctxtimeout"} {
		b.Run("acquire-"+kind+"ctx", func(b *testing.B) {
			var x *lockbench.LockerContender
			if kind == "deadline-ctxtimeout" {
				c := redis.NewClient(&redis.Options{Addr: addr, ContextTimeoutEnabled: true})
				d, err := dlredis.New(c, nil)
				if err != nil {
					b.Fatal(err)
				}
				x = &lockbench.LockerContender{L: distlock.New(d, distlock.WithDefaultTTL(leaseTTL)), CloseClient: func() { _ = c.Close() }}
			} else {
				c := userClient(addr, nil)
				d, err := dlredis.New(c, nil)
				if err != nil {
					b.Fatal(err)
				}
				opts := []distlock.LockerOption{distlock.WithDefaultTTL(leaseTTL)}
				if kind == "cancel-oncaller" {
					opts = append(opts, distlock.WithReleaseOnCaller())
				}
				x = &lockbench.LockerContender{L: distlock.New(d, opts...), CloseClient: func() { _ = c.Close() }}
			}
			defer x.Close()
			key := lockbench.UniqueKey("layers")
			cctx, cancel := context.WithCancel(ctx)
			defer cancel()
			if strings.HasPrefix(kind, "deadline") {
				cctx, cancel = context.WithTimeout(cctx, time.Hour)
				defer cancel()
			}
			b.ReportAllocs()
			for b.Loop() {
				le, err := x.L.Acquire(cctx, key)
				if err != nil {
					b.Fatal(err)
				}
				if err := le.Release(cctx); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
	b.Run("bsm", func(b *testing.B) {
		x := bsmLib([]string{addr}, nil)
		defer x.Close()
		key := lockbench.UniqueKey("layers")
		b.ReportAllocs()
		defer scriptTime(b)()
		contenderPairs(ctx, b, x, key)
	})
}

// scriptTime reports, when the returned function is called, the server's
// time in EVALSHA per op (the scripts' run time inside Redis).
func scriptTime(b *testing.B) func() {
	read := func() int64 {
		c := redis.NewClient(&redis.Options{Addr: addr})
		defer c.Close()
		raw, err := c.Info(context.Background(), "commandstats").Result()
		if err != nil {
			b.Fatal(err)
		}
		for line := range strings.SplitSeq(raw, "\n") {
			if rest, ok := strings.CutPrefix(strings.TrimSpace(line), "cmdstat_evalsha:"); ok {
				for f := range strings.SplitSeq(rest, ",") {
					if v, ok := strings.CutPrefix(f, "usec="); ok {
						n, _ := strconv.ParseInt(v, 10, 64)
						return n
					}
				}
			}
		}
		return 0
	}
	before := read()
	return func() { b.ReportMetric(float64(read()-before)*1000/float64(b.N), "srv-ns/op") }
}
