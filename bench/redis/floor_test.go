package redisbench

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/distlock/distlock/backend"
	"github.com/distlock/distlock/bench/internal/lockbench"
	"github.com/distlock/distlock/bench/internal/measure"
	"github.com/distlock/distlock/bench/internal/peers"
	dlredis "github.com/distlock/distlock/redislock"
	"github.com/distlock/distlock/sandbox"
)

// TestPairFloor splits the single-node pair's cost against bsm/redislock
// with synthetic pairs that isolate one thing each, all timed in one run
// in rotating rounds:
//
//   - empty scripts with bsm/redislock's wire shape (its keys and
//     arguments) and with distlock's (4 keys and 4 arguments, then 5 keys
//     and 1, with the names and id lengths the driver sends): what the
//     bytes and arguments cost, with no work in Redis;
//   - busy scripts with distlock's shape that spin in Lua for as long as
//     distlock's scripts run (calibrated from INFO commandstats at the
//     start): distlock's wire shape and server time with no driver code;
//   - the driver's TryAcquire and queue-mode Wait, each with Release, and
//     the Locker's Acquire with Release (what TestPairs calls distlock);
//   - the fenced floor (internal/peers.RedisFenced: SET NX PX + INCR in one
//     script, an owner-checked DEL), the least a lock with a token does.
//
// Each row also reports, per pair, Redis's time inside EVALSHA (INFO
// commandstats), the server's CPU (INFO cpu) and the client process's CPU
// (getrusage), read before and after every slice, outside the timed pairs.
// Read the median of the per-round ratios when the machine changed phase
// during the run (the p50 over all pairs then mixes phases).
//
//	cd bench && DISTLOCK_SANDBOX=local go test -count=1 -run TestPairFloor -v ./redis/
//
// DISTLOCK_BENCH_ROUNDS (default 10) and DISTLOCK_BENCH_PAIRS (pairs per
// row and round, default 400) size it.
func TestPairFloor(t *testing.T) {
	if testing.Short() {
		t.Skip("short mode")
	}
	ctx := context.Background()
	rounds := envInt("DISTLOCK_BENCH_ROUNDS", 10)
	pairs := envInt("DISTLOCK_BENCH_PAIRS", 400)
	a := sandbox.StartT(t, sandbox.Spec{Kind: sandbox.Redis, Stock: true}).Addrs()[0]
	adm := redis.NewClient(&redis.Options{Addr: a})
	defer adm.Close()

	spin := calibrateSpin(ctx, t, a, adm)
	rows := []pairLib{
		{name: "PING", floor: true, make: pingLib},
		{name: "empty, bsm shape", make: shapedPair(bsmShape, 0)},
		{name: "empty, dl shape", make: shapedPair(dlShape, 0)},
		{name: "busy, dl shape", make: shapedPair(dlShape, spin)},
		{name: "driver try", make: driverPair(false)},
		{name: "driver wait", make: driverPair(true)},
		{name: "distlock", make: dlSingle(nil)},
		{name: "bsm/redislock", make: bsmLib},
		{name: "fenced floor", make: func(addrs []string, hook func(int) redis.Hook) measure.Contender {
			c := userClient(addrs[0], nil)
			if hook != nil {
				c.AddHook(hook(0))
			}
			return &peers.RedisFenced{C: c, TTL: leaseTTL}
		}},
	}
	type row struct {
		rounds                  [][]time.Duration
		evalUs, cliUs, srvUs, n float64
	}
	xs := map[string]measure.Contender{}
	keys := map[string]string{}
	res := map[string]*row{}
	for _, r := range rows {
		xs[r.name] = r.make([]string{a}, nil)
		defer xs[r.name].Close()
		keys[r.name] = lockbench.UniqueKey("floor")
		if _, err := measure.Pairs(ctx, xs[r.name], keys[r.name], 20, 0); err != nil {
			t.Fatalf("%s: warm-up: %v", r.name, err)
		}
		res[r.name] = &row{}
	}
	for i := range rounds {
		for _, r := range measure.Rotate(rows, i) {
			s0, c0 := serverStats(ctx, t, adm), processCPU()
			ds, err := measure.Pairs(ctx, xs[r.name], keys[r.name], pairs, 0)
			if err != nil {
				t.Fatalf("%s: %v", r.name, err)
			}
			c1, s1 := processCPU(), serverStats(ctx, t, adm)
			x := res[r.name]
			x.rounds = append(x.rounds, ds)
			x.evalUs += s1.evalUs - s0.evalUs
			x.srvUs += (s1.cpu - s0.cpu) * 1e6
			x.cliUs += float64(c1-c0) / float64(time.Microsecond)
			x.n += float64(len(ds))
		}
	}
	var out strings.Builder
	fmt.Fprintf(&out, "%d rounds x %d pairs per row, order rotating; busy scripts spin %d Lua iterations each\n", rounds, pairs, spin)
	fmt.Fprintf(&out, "  %-18s %8s %6s %14s %12s %12s %12s\n", "row", "p50", "/bsm", "median round", "evalsha/pair", "client CPU", "server CPU")
	bsm := res["bsm/redislock"]
	for _, r := range rows {
		x := res[r.name]
		var per []float64
		for i := range x.rounds {
			per = append(per, float64(measure.Median(x.rounds[i]))/float64(measure.Median(bsm.rounds[i])))
		}
		p50 := measure.Median(concat(x.rounds))
		fmt.Fprintf(&out, "  %-18s %8v %6.2f %14.2f %10.1fµs %10.1fµs %10.1fµs\n", r.name, p50.Round(100*time.Nanosecond),
			float64(p50)/float64(measure.Median(concat(bsm.rounds))), measure.Median(per), x.evalUs/x.n, x.cliUs/x.n, x.srvUs/x.n)
	}
	t.Log("\n" + out.String())
}

func concat(xs [][]time.Duration) []time.Duration {
	var out []time.Duration
	for _, x := range xs {
		out = append(out, x...)
	}
	return out
}

// wireShape is what one pair sends: the acquire's and the release's keys
// and arguments, made from the user's key.
type wireShape func(key string) (acqKeys []string, acqArgs []any, relKeys []string, relArgs []any)

// bsmShape is bsm/redislock's pair: its obtain script gets the key, a
// 22-character token and the TTL; its release the key and the token.
func bsmShape(key string) ([]string, []any, []string, []any) {
	token := strings.Repeat("t", 22)
	return []string{key}, []any{token, leaseTTL.Milliseconds()}, []string{key}, []any{token}
}

// dlShape is distlock's queue-mode pair as the driver sends it (keys.go,
// fair.go): the lock, fence, queue and alive names, then owner (32 hex
// digits), TTL, hold (16) and queue entry; the release's five names and
// the hold.
func dlShape(key string) ([]string, []any, []string, []any) {
	name := func(s string) string { return "distlock:{" + key + "}:" + s }
	hold := strings.Repeat("h", 16)
	acq := []any{strings.Repeat("o", 32), leaseTTL.Milliseconds(), hold, "3000:0:distlock:inbox:" + strings.Repeat("i", 16)}
	return []string{name("lock"), name("fence"), name("queue"), name("alive")}, acq,
		[]string{name("lock"), name("queue"), name("alive"), name("fence"), name("last")}, []any{hold}
}

// spinScript does nothing for n iterations of a Lua loop.
func spinScript(n int) *redis.Script {
	return redis.NewScript(fmt.Sprintf("local x = 0 for i = 1, %d do x = x + i end return 1", n))
}

// shapedPair runs two scripts that spin n iterations each (0: return at
// once) with the keys and arguments of shape.
func shapedPair(shape wireShape, n int) func([]string, func(int) redis.Hook) measure.Contender {
	s := spinScript(n)
	return func(addrs []string, hook func(int) redis.Hook) measure.Contender {
		cs := clients(addrs[:1], hook)
		c := cs[0]
		return closer{measure.AcquireFunc(func(ctx context.Context, key string) (func(context.Context) error, error) {
			ak, aa, rk, ra := shape(key)
			if err := s.Run(ctx, c, ak, aa...).Err(); err != nil {
				return nil, err
			}
			return func(ctx context.Context) error { return s.Run(ctx, c, rk, ra...).Err() }, nil
		}), func() { closeAll(cs) }}
	}
}

// driverPair is the redislock driver alone: TryAcquire (or, with wait,
// the queue mode's Wait) and Release.
func driverPair(wait bool) func([]string, func(int) redis.Hook) measure.Contender {
	return func(addrs []string, hook func(int) redis.Hook) measure.Contender {
		cs := clients(addrs[:1], hook)
		d, err := dlredis.New(cs[0], nil)
		if err != nil {
			panic(err)
		}
		owner := strings.Repeat("o", 32)
		return closer{measure.AcquireFunc(func(ctx context.Context, key string) (func(context.Context) error, error) {
			req := backend.Request{Key: key, Owner: owner, TTL: leaseTTL}
			var g backend.Grant
			var err error
			if wait {
				g, err = d.Wait(ctx, req)
			} else {
				g, err = d.TryAcquire(ctx, req)
			}
			if err != nil {
				return nil, err
			}
			return g.Lock.Release, nil
		}), func() { _ = d.Close(); closeAll(cs) }}
	}
}

// calibrateSpin returns how many Lua iterations make one spinning script
// with distlock's shape run as long as one of distlock's scripts does on
// average (EVALSHA time per call, INFO commandstats); rough (±2 µs a
// pair), which the rows' own EVALSHA figures show.
func calibrateSpin(ctx context.Context, t *testing.T, a string, adm *redis.Client) int {
	const n, probe = 300, 2000
	perPair := func(make func([]string, func(int) redis.Hook) measure.Contender) float64 {
		x := make([]string{a}, nil)
		defer x.Close()
		key := lockbench.UniqueKey("calibrate")
		if _, err := measure.Pairs(ctx, x, key, 20, 0); err != nil {
			t.Fatal(err)
		}
		before := serverStats(ctx, t, adm)
		if _, err := measure.Pairs(ctx, x, key, n, 0); err != nil {
			t.Fatal(err)
		}
		return (serverStats(ctx, t, adm).evalUs - before.evalUs) / n
	}
	// Three interleaved readings of each, their medians: one reading can
	// land in a slow moment of the machine.
	var dls, empties, busies []float64
	for range 3 {
		dls = append(dls, perPair(driverPair(true)))
		empties = append(empties, perPair(shapedPair(dlShape, 0)))
		busies = append(busies, perPair(shapedPair(dlShape, probe)))
	}
	dl, empty, busy := measure.Median(dls), measure.Median(empties), measure.Median(busies)
	perIter := (busy - empty) / (2 * probe)
	if perIter <= 0 || dl <= empty {
		return 0
	}
	return int((dl - empty) / 2 / perIter)
}

// serverReading is Redis's EVALSHA time (µs) and CPU time (s) so far.
type serverReading struct{ evalUs, cpu float64 }

func serverStats(ctx context.Context, t *testing.T, c *redis.Client) serverReading {
	raw, err := c.Info(ctx, "commandstats", "cpu").Result()
	if err != nil {
		t.Fatal(err)
	}
	var r serverReading
	for line := range strings.SplitSeq(raw, "\n") {
		line = strings.TrimSpace(line)
		if rest, ok := strings.CutPrefix(line, "cmdstat_evalsha:"); ok {
			for f := range strings.SplitSeq(rest, ",") {
				if v, ok := strings.CutPrefix(f, "usec="); ok {
					r.evalUs, _ = strconv.ParseFloat(v, 64)
				}
			}
		}
		for _, p := range []string{"used_cpu_sys:", "used_cpu_user:"} {
			if v, ok := strings.CutPrefix(line, p); ok {
				f, _ := strconv.ParseFloat(v, 64)
				r.cpu += f
			}
		}
	}
	return r
}

// processCPU is this process's user and system CPU time so far.
func processCPU() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
